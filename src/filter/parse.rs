//! The CLI's filter syntax, by recursive descent. Precedence as SQL's: `not` binds tighter than
//! `and`, which binds tighter than `or`; parentheses group.
//!
//! ```text
//! expr      := and ("or" and)*
//! and       := not ("and" not)*
//! not       := "not" not | "(" expr ")" | predicate
//! predicate := column op literal
//!            | column                      (a boolean column: column = true)
//!            | column "is" ["not"] "null"
//!            | column ["not"] "in" "(" literal ("," literal)* ")"
//!            | column ["not"] "between" literal "and" literal
//! op        := "=" | "==" | "!=" | "<>" | "<" | "<=" | ">" | ">="
//! column    := name (letters, digits, _, ., $) | "double quoted" | `backticked`
//! literal   := number | 'single quoted' ('' for a quote) | true | false
//!            | (date | timestamp | time) 'text'
//! ```
//! Keywords are case-insensitive.

use std::fmt;

use super::{CmpOp, Expr, Literal};

/// A syntax error at a byte position of the text.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ParseError {
    pub position: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at position {}: {}", self.position, self.message)
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    /// A bare word: a keyword or a column name.
    Word(String),
    /// A quoted column name.
    Quoted(String),
    Str(String),
    Number(String),
    Op(CmpOp),
    LParen,
    RParen,
    Comma,
    End,
}

impl fmt::Display for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tok::Word(w) => write!(f, "'{w}'"),
            Tok::Quoted(w) => write!(f, "\"{w}\""),
            Tok::Str(s) => write!(f, "the string '{s}'"),
            Tok::Number(n) => write!(f, "the number {n}"),
            Tok::Op(op) => write!(f, "'{}'", op.symbol()),
            Tok::LParen => f.write_str("'('"),
            Tok::RParen => f.write_str("')'"),
            Tok::Comma => f.write_str("','"),
            Tok::End => f.write_str("the end"),
        }
    }
}

fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '.' || c == '$'
}

fn tokenize(text: &str) -> Result<Vec<(usize, Tok)>, ParseError> {
    let err = |position, message: String| ParseError { position, message };
    let mut out = Vec::new();
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut i = 0;
    while i < chars.len() {
        let (pos, c) = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let peek = chars.get(i + 1).map(|x| x.1);
        let tok = match c {
            '(' => Tok::LParen,
            ')' => Tok::RParen,
            ',' => Tok::Comma,
            '=' => {
                if peek == Some('=') {
                    i += 1;
                }
                Tok::Op(CmpOp::Eq)
            }
            '!' if peek == Some('=') => {
                i += 1;
                Tok::Op(CmpOp::NotEq)
            }
            '<' => match peek {
                Some('=') => {
                    i += 1;
                    Tok::Op(CmpOp::LtEq)
                }
                Some('>') => {
                    i += 1;
                    Tok::Op(CmpOp::NotEq)
                }
                _ => Tok::Op(CmpOp::Lt),
            },
            '>' => {
                if peek == Some('=') {
                    i += 1;
                    Tok::Op(CmpOp::GtEq)
                } else {
                    Tok::Op(CmpOp::Gt)
                }
            }
            '\'' | '"' | '`' => {
                // A quote inside is written twice.
                let quote = c;
                let mut s = String::new();
                let mut j = i + 1;
                loop {
                    match chars.get(j) {
                        None => return Err(err(pos, format!("unterminated {quote}quoted{quote} text"))),
                        Some(&(_, q)) if q == quote => {
                            if chars.get(j + 1).map(|x| x.1) == Some(quote) {
                                s.push(quote);
                                j += 2;
                            } else {
                                break;
                            }
                        }
                        Some(&(_, ch)) => {
                            s.push(ch);
                            j += 1;
                        }
                    }
                }
                i = j;
                if quote == '\'' { Tok::Str(s) } else { Tok::Quoted(s) }
            }
            c if c.is_ascii_digit()
                || ((c == '-' || c == '+' || c == '.') && peek.is_some_and(|p| p.is_ascii_digit() || p == '.')) =>
            {
                let mut j = i + 1;
                while let Some(&(_, ch)) = chars.get(j) {
                    let prev = chars[j - 1].1;
                    let exponent_sign = (ch == '-' || ch == '+') && (prev == 'e' || prev == 'E');
                    if ch.is_ascii_alphanumeric() || ch == '.' || exponent_sign {
                        j += 1;
                    } else {
                        break;
                    }
                }
                let end = chars.get(j).map_or(text.len(), |x| x.0);
                let n = &text[pos..end];
                if n.parse::<f64>().is_err() {
                    return Err(err(pos, format!("'{n}' is not a number")));
                }
                i = j - 1;
                Tok::Number(n.to_string())
            }
            c if is_name_char(c) => {
                let mut j = i + 1;
                while chars.get(j).is_some_and(|x| is_name_char(x.1)) {
                    j += 1;
                }
                let end = chars.get(j).map_or(text.len(), |x| x.0);
                i = j - 1;
                Tok::Word(text[pos..end].to_string())
            }
            other => return Err(err(pos, format!("unexpected character '{other}'"))),
        };
        out.push((pos, tok));
        i += 1;
    }
    out.push((text.len(), Tok::End));
    Ok(out)
}

struct Parser {
    toks: Vec<(usize, Tok)>,
    at: usize,
}

fn is_keyword(t: &Tok, kw: &str) -> bool {
    matches!(t, Tok::Word(w) if w.eq_ignore_ascii_case(kw))
}

const RESERVED: &[&str] = &["and", "or", "not", "in", "is", "null", "between", "true", "false"];

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.at].1
    }

    fn pos(&self) -> usize {
        self.toks[self.at].0
    }

    fn next(&mut self) -> (usize, Tok) {
        let t = self.toks[self.at].clone();
        if self.at + 1 < self.toks.len() {
            self.at += 1;
        }
        t
    }

    fn eat_keyword(&mut self, kw: &str) -> bool {
        if is_keyword(self.peek(), kw) {
            self.next();
            true
        } else {
            false
        }
    }

    fn error<T>(&self, expected: &str) -> Result<T, ParseError> {
        Err(ParseError {
            position: self.pos(),
            message: format!("expected {expected}, found {}", self.peek()),
        })
    }

    fn expect_keyword(&mut self, kw: &str) -> Result<(), ParseError> {
        if self.eat_keyword(kw) {
            Ok(())
        } else {
            self.error(&format!("'{kw}'"))
        }
    }

    fn or(&mut self) -> Result<Expr, ParseError> {
        let mut e = self.and()?;
        while self.eat_keyword("or") {
            e = e.or(self.and()?);
        }
        Ok(e)
    }

    fn and(&mut self) -> Result<Expr, ParseError> {
        let mut e = self.not()?;
        while self.eat_keyword("and") {
            e = e.and(self.not()?);
        }
        Ok(e)
    }

    fn not(&mut self) -> Result<Expr, ParseError> {
        if self.eat_keyword("not") {
            return Ok(self.not()?.not());
        }
        if *self.peek() == Tok::LParen {
            self.next();
            let e = self.or()?;
            if *self.peek() != Tok::RParen {
                return self.error("')'");
            }
            self.next();
            return Ok(e);
        }
        self.predicate()
    }

    fn column(&mut self) -> Result<String, ParseError> {
        match self.peek().clone() {
            Tok::Word(w) if !RESERVED.iter().any(|k| w.eq_ignore_ascii_case(k)) => {
                self.next();
                Ok(w)
            }
            Tok::Quoted(w) => {
                self.next();
                Ok(w)
            }
            _ => self.error("a column name"),
        }
    }

    fn predicate(&mut self) -> Result<Expr, ParseError> {
        let column = self.column()?;
        // A bare (boolean) column is `column = true`.
        if matches!(self.peek(), Tok::End | Tok::RParen)
            || is_keyword(self.peek(), "and")
            || is_keyword(self.peek(), "or")
        {
            return Ok(Expr::Compare {
                column,
                op: CmpOp::Eq,
                value: Literal::Bool(true),
            });
        }
        match self.peek().clone() {
            Tok::Op(op) => {
                self.next();
                let value = self.literal()?;
                Ok(Expr::Compare { column, op, value })
            }
            Tok::Word(_) => {
                if self.eat_keyword("is") {
                    let negated = self.eat_keyword("not");
                    self.expect_keyword("null")?;
                    return Ok(Expr::IsNull { column, negated });
                }
                let negated = self.eat_keyword("not");
                if self.eat_keyword("in") {
                    if *self.peek() != Tok::LParen {
                        return self.error("'(' after 'in'");
                    }
                    self.next();
                    let mut values = vec![self.literal()?];
                    while *self.peek() == Tok::Comma {
                        self.next();
                        values.push(self.literal()?);
                    }
                    if *self.peek() != Tok::RParen {
                        return self.error("',' or ')'");
                    }
                    self.next();
                    return Ok(Expr::InList {
                        column,
                        values,
                        negated,
                    });
                }
                if self.eat_keyword("between") {
                    let low = self.literal()?;
                    self.expect_keyword("and")?;
                    let high = self.literal()?;
                    let e = Expr::Between { column, low, high };
                    return Ok(if negated { e.not() } else { e });
                }
                self.error(if negated {
                    "'in' or 'between' after 'not'"
                } else {
                    "a comparison, 'is', 'in' or 'between'"
                })
            }
            _ => self.error(&format!(
                "a comparison, 'is', 'in' or 'between' after the column {column}"
            )),
        }
    }

    fn literal(&mut self) -> Result<Literal, ParseError> {
        match self.peek().clone() {
            Tok::Number(n) => {
                self.next();
                Ok(Literal::Number(n))
            }
            Tok::Str(s) => {
                self.next();
                Ok(Literal::Str(s))
            }
            Tok::Word(w) if w.eq_ignore_ascii_case("true") || w.eq_ignore_ascii_case("false") => {
                self.next();
                Ok(Literal::Bool(w.eq_ignore_ascii_case("true")))
            }
            Tok::Word(w) if w.eq_ignore_ascii_case("null") => Err(ParseError {
                position: self.pos(),
                message: "null compares to unknown and matches nothing: use 'is null' or 'is not null'".into(),
            }),
            // SQL's typed literals: the type comes from the column anyway.
            Tok::Word(w)
                if ["date", "timestamp", "time"].iter().any(|k| w.eq_ignore_ascii_case(k))
                    && matches!(self.toks.get(self.at + 1), Some((_, Tok::Str(_)))) =>
            {
                self.next();
                self.literal()
            }
            _ => self.error("a literal (a number, a 'quoted string', true or false)"),
        }
    }
}

pub(crate) fn parse(text: &str) -> Result<Expr, ParseError> {
    let mut p = Parser {
        toks: tokenize(text)?,
        at: 0,
    };
    if *p.peek() == Tok::End {
        return p.error("a filter expression");
    }
    let e = p.or()?;
    if *p.peek() != Tok::End {
        return p.error("'and', 'or' or the end");
    }
    Ok(e)
}

/// A column name as the parser reads it back: bare when it can be, else double-quoted.
pub(crate) fn quote_column(name: &str) -> String {
    let bare = !name.is_empty()
        && name.chars().all(is_name_char)
        && !name.starts_with(|c: char| c.is_ascii_digit() || c == '.')
        && !RESERVED.iter().any(|k| name.eq_ignore_ascii_case(k));
    if bare {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}
