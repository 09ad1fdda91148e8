//! The crate's layers point one way. Reads `src/**/*.rs` (comments, strings and `#[cfg(test)]` code
//! left out: tests may use anything), collects each module's `crate::<module>` and `super::` paths
//! (and the crate root's re-exports, `crate::Reader` being `reader`'s), and asserts
//! (a) no cycle between the top-level modules of `src/`, nor between the submodules of `src/decode/`;
//! (b) every reference goes down or sideways in [`LAYERS`] and [`DECODE_LAYERS`], which name every
//! module: a new one must be placed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level modules of `src/`, bottom first. A module may use those of its own layer and below.
const LAYERS: &[(&str, &[&str])] = &[
    ("foundation", &["error", "panic_guard", "trace", "byte_size", "shares"]),
    ("device", &["gpu"]),
    ("file and settings", &["metadata", "plan", "config"]),
    ("I/O", &["io", "report", "conformance"]),
    (
        "decode, filters and export",
        &["decode", "filter", "device_ffi", "ipc_file"],
    ),
    ("reads", &["scan", "reader", "device_read"]),
    ("many files and devices", &["dataset", "multi_device"]),
    ("CLI", &["bench", "check", "inspect", "fuzzing", "main"]),
];

/// Submodules of `src/decode/`, bottom first.
const DECODE_LAYERS: &[(&str, &[&str])] = &[
    ("descriptors and codecs", &["layout", "decompress", "snappy_route"]),
    ("kernels and their host twins", &["kernels", "host_kernels"]),
    ("executors' interface, arrow-rs", &["exec", "host", "host_headers"]),
    (
        "executors and the row filter",
        &["exec_device", "table", "row_filter", "row_filter_tests"],
    ),
    ("pipeline", &["pipeline"]),
    ("decoder", &["gpu"]),
];

/// `text` with comments, string and character literals blanked.
fn strip(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
            continue;
        }
        let ident_before = i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
        if b[i] == b'r' && !ident_before {
            // Raw string: r"..." or r#"..."#.
            let mut j = i + 1;
            while j < b.len() && b[j] == b'#' {
                j += 1;
            }
            if j < b.len() && b[j] == b'"' {
                let hashes = j - i - 1;
                let mut end = String::from("\"");
                end.push_str(&"#".repeat(hashes));
                let rest = &text[j + 1..];
                i = rest.find(&end).map_or(b.len(), |k| j + 1 + k + end.len());
                out.push_str("\"\"");
                continue;
            }
        }
        if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
            continue;
        }
        if b[i] == b'\'' {
            // A character literal ('x', '\n', '\u{..}'), not a lifetime.
            let rest = &text[i + 1..];
            let len = if rest.starts_with('\\') {
                rest.find('\'').map(|k| k + 1)
            } else {
                rest.chars()
                    .next()
                    .filter(|_| rest.chars().nth(1) == Some('\''))
                    .map(|c| c.len_utf8() + 1)
            };
            if let Some(len) = len {
                i += 1 + len;
                out.push_str("' '");
                continue;
            }
        }
        let c = text[i..].chars().next().unwrap_or(' ');
        out.push(c);
        i += c.len_utf8();
    }
    out
}

/// `code` (stripped) without `#[cfg(test)]` items, and the names of the `#[cfg(test)] mod name;`
/// files it declares.
fn without_tests(code: &str) -> (String, Vec<String>) {
    let mut out = String::new();
    let mut test_mods = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let item = &rest[at + "#[cfg(test)]".len()..];
        let semi = item.find(';').unwrap_or(item.len());
        let brace = item.find('{').unwrap_or(item.len());
        let end = if semi < brace {
            let decl: Vec<&str> = item[..semi].split_whitespace().collect();
            if let Some(k) = decl.iter().position(|w| *w == "mod") {
                test_mods.push(decl[k + 1].to_string());
            }
            semi + 1
        } else {
            let mut depth = 0;
            let mut end = item.len();
            for (k, c) in item.char_indices().skip(brace) {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = k + 1;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            end
        };
        rest = &item[end.min(item.len())..];
    }
    out.push_str(rest);
    (out, test_mods)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read src") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// A file's module path under `src/` (`decode/pipeline/headers.rs` → decode, pipeline, headers).
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("under src").with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|s| s.to_string_lossy().into_owned()).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// Every path a module's code names: `crate::a::b` (and `crate::{a, b}`), `super::...` resolved, as
/// absolute module paths (what follows `crate`).
fn references(code: &str, module: &[String]) -> Vec<Vec<String>> {
    let ident = |s: &str| -> String { s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect() };
    let path_at = |s: &str| -> Vec<String> {
        let mut parts = Vec::new();
        let mut rest = s;
        loop {
            let id = ident(rest);
            if id.is_empty() {
                break;
            }
            rest = &rest[id.len()..];
            parts.push(id);
            match rest.strip_prefix("::") {
                Some(r) => rest = r,
                None => break,
            }
        }
        parts
    };
    let mut refs = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        if at > 0 && code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let inner = &group[..group.find('}').unwrap_or(group.len())];
            refs.extend(
                inner
                    .split(',')
                    .map(|item| path_at(item.trim()))
                    .filter(|p| !p.is_empty()),
            );
        } else {
            refs.push(path_at(rest));
        }
    }
    let mut search = 0;
    while let Some(k) = code[search..].find("super::") {
        let at = search + k;
        let preceded = at > 0 && code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_');
        let mut rest = &code[at..];
        let mut ups = 0;
        while let Some(r) = rest.strip_prefix("super::") {
            ups += 1;
            rest = r;
        }
        search = at + ups * "super::".len();
        if preceded || ups > module.len() {
            continue;
        }
        let mut path = module[..module.len() - ups].to_vec();
        path.extend(path_at(rest));
        refs.push(path);
    }
    refs
}

struct Graph {
    /// Top-level module → the top-level modules it names.
    top: BTreeMap<String, BTreeSet<String>>,
    /// `decode` submodule → the `decode` submodules it names.
    decode: BTreeMap<String, BTreeSet<String>>,
}

fn read_graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = strip(&std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs"));
    let declared = |code: &str| -> BTreeSet<String> {
        code.lines()
            .filter_map(|l| {
                let l = l.trim();
                let rest = l
                    .strip_prefix("pub mod ")
                    .or_else(|| l.strip_prefix("pub(crate) mod "))?;
                Some(rest.trim_end_matches(';').to_string())
            })
            .collect()
    };
    let tops = declared(&lib);
    let decode_mods = declared(&strip(
        &std::fs::read_to_string(src.join("decode/mod.rs")).expect("decode/mod.rs"),
    ));
    // The crate root's re-exports (`pub use reader::{Reader, ...};`): a name → its module.
    let mut reexports = BTreeMap::new();
    for line in lib.lines() {
        if let Some(rest) = line.trim().strip_prefix("pub use ")
            && let Some((module, names)) = rest.split_once("::")
        {
            for name in names.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
                if !name.is_empty() {
                    reexports.insert(name.to_string(), module.to_string());
                }
            }
        }
    }
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    // Files declared `#[cfg(test)] mod name;` (and everything under them) are tests.
    let mut test_files: BTreeSet<Vec<String>> = BTreeSet::new();
    let mut stripped = BTreeMap::new();
    for f in &files {
        let module = module_path(&src, f);
        let (code, test_mods) = without_tests(&strip(&std::fs::read_to_string(f).expect("read")));
        for m in test_mods {
            // `a/b.rs` and `a/b/mod.rs` both declare their children under `a/b/`; lib.rs under src/.
            let mut p = module.clone();
            if p == ["lib"] {
                p.clear();
            }
            p.push(m);
            test_files.insert(p);
        }
        stripped.insert(module, code);
    }
    let mut graph = Graph {
        top: BTreeMap::new(),
        decode: BTreeMap::new(),
    };
    for (module, code) in &stripped {
        if module == &["lib"] || test_files.iter().any(|t| module.starts_with(t)) {
            continue;
        }
        let code = if module == &["main"] {
            code.replace("gpu_parquet::", "crate::")
        } else {
            code.clone()
        };
        let me = &module[0];
        for mut r in references(&code, module) {
            if let Some(m) = r.first().and_then(|n| reexports.get(n)) {
                r = vec![m.clone()];
            }
            let Some(to) = r.first().filter(|t| tops.contains(*t)) else {
                continue;
            };
            if to != me {
                graph.top.entry(me.clone()).or_default().insert(to.clone());
            } else if me == "decode"
                && module.len() > 1
                && let Some(sub) = r.get(1).filter(|s| decode_mods.contains(*s) && **s != module[1])
            {
                graph.decode.entry(module[1].clone()).or_default().insert(sub.clone());
            }
        }
        graph.top.entry(me.clone()).or_default();
        if me == "decode" && module.len() > 1 {
            graph.decode.entry(module[1].clone()).or_default();
        }
    }
    graph
}

/// A cycle of `edges` (its modules in order, the first repeated at the end), if any, ignoring the
/// pairs of `allowed`.
fn find_cycle(edges: &BTreeMap<String, BTreeSet<String>>, allowed: &[(&str, &str)]) -> Option<Vec<String>> {
    let skip = |a: &str, b: &str| allowed.iter().any(|&(x, y)| (x, y) == (a, b) || (y, x) == (a, b));
    fn visit<'a>(
        n: &'a str,
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        skip: &dyn Fn(&str, &str) -> bool,
        state: &mut BTreeMap<&'a str, u8>,
        stack: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        state.insert(n, 1);
        stack.push(n);
        for m in edges.get(n).into_iter().flatten() {
            if skip(n, m) {
                continue;
            }
            match state.get(m.as_str()) {
                Some(1) => {
                    let from = stack.iter().position(|s| s == m).unwrap_or(0);
                    let mut cycle: Vec<String> = stack[from..].iter().map(|s| s.to_string()).collect();
                    cycle.push(m.clone());
                    return Some(cycle);
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(m, edges, skip, state, stack) {
                        return Some(c);
                    }
                }
            }
        }
        stack.pop();
        state.insert(n, 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in edges.keys() {
        if !state.contains_key(n.as_str())
            && let Some(c) = visit(n, edges, &skip, &mut state, &mut Vec::new())
        {
            return Some(c);
        }
    }
    None
}

/// Each edge going up `layers`, and each module `layers` does not place.
fn layer_violations(edges: &BTreeMap<String, BTreeSet<String>>, layers: &[(&str, &[&str])]) -> Vec<String> {
    let rank = |m: &str| layers.iter().position(|(_, ms)| ms.contains(&m));
    let mut bad = Vec::new();
    for (from, tos) in edges {
        let Some(rf) = rank(from) else {
            bad.push(format!("`{from}` is in no layer: place it"));
            continue;
        };
        for to in tos {
            match rank(to) {
                Some(rt) if rt > rf => bad.push(format!(
                    "`{from}` ({}) uses `{to}` ({}), a layer above it",
                    layers[rf].0, layers[rt].0
                )),
                Some(_) => {}
                None => bad.push(format!("`{to}` is in no layer: place it")),
            }
        }
    }
    bad.sort();
    bad.dedup();
    bad
}

#[test]
fn top_level_modules_have_no_cycle_and_point_down() {
    let g = read_graph();
    assert!(
        g.top.contains_key("decode") && g.top.contains_key("reader"),
        "{:?}",
        g.top.keys()
    );
    if let Some(c) = find_cycle(&g.top, &[]) {
        panic!("a cycle between top-level modules: {}", c.join(" -> "));
    }
    let bad = layer_violations(&g.top, LAYERS);
    assert!(bad.is_empty(), "layers of src/:\n{}", bad.join("\n"));
}

#[test]
fn decode_submodules_have_no_cycle_and_point_down() {
    let g = read_graph();
    assert!(g.decode.contains_key("pipeline"), "{:?}", g.decode.keys());
    if let Some(c) = find_cycle(&g.decode, &[]) {
        panic!("a cycle between src/decode/ submodules: {}", c.join(" -> "));
    }
    let bad = layer_violations(&g.decode, DECODE_LAYERS);
    assert!(bad.is_empty(), "layers of src/decode/:\n{}", bad.join("\n"));
}

/// The reading of the sources that the tests above rely on.
#[test]
fn the_reader_finds_paths_and_leaves_out_comments_strings_and_tests() {
    let code = strip(
        "use crate::io::x; // crate::bench\n/* crate::main */ let s = \"crate::dataset\";\n\
         let c = '\"'; fn f<'a>() { super::super::exec::y(); crate::{plan::A, gpu::B}; }\n\
         #[cfg(test)]\nmod tests { use crate::reader; }\n#[cfg(test)]\nmod more;\n",
    );
    let (code, test_mods) = without_tests(&code);
    assert_eq!(test_mods, ["more"]);
    let module: Vec<String> = ["decode", "pipeline", "headers"].map(String::from).to_vec();
    let refs: Vec<String> = references(&code, &module).iter().map(|r| r.join("::")).collect();
    assert_eq!(refs, ["io::x", "plan::A", "gpu::B", "decode::exec::y"]);

    let edges = |pairs: &[(&str, &str)]| -> BTreeMap<String, BTreeSet<String>> {
        let mut m: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in pairs {
            m.entry(a.to_string()).or_default().insert(b.to_string());
        }
        m
    };
    let cyclic = edges(&[("a", "b"), ("b", "c"), ("c", "a")]);
    assert_eq!(find_cycle(&cyclic, &[]).expect("a cycle"), ["a", "b", "c", "a"]);
    assert!(find_cycle(&cyclic, &[("c", "a")]).is_none());
    assert!(find_cycle(&edges(&[("a", "b"), ("a", "c"), ("b", "c")]), &[]).is_none());
    let layers: &[(&str, &[&str])] = &[("low", &["a"]), ("high", &["b"])];
    assert_eq!(layer_violations(&edges(&[("a", "b")]), layers).len(), 1);
    assert!(layer_violations(&edges(&[("b", "a")]), layers).is_empty());
}
