//! The C API a llama.cpp tree offers, read from its public header at build time.
//!
//! `llama-cpp-sys-2` generates its Rust bindings from `include/llama.h` with bindgen, so the
//! declarations in that header are exactly the functions and struct fields a release's
//! bindings contain. [`scan`] reads the header's function declarations (name and parameter
//! types) and struct fields; `subject`'s build script turns them into `cfg` flags, so the
//! wrapper calls what the linked release has instead of keeping a feature per release. The
//! scan is deliberately small: comments and preprocessor lines are dropped, `DEPRECATED(...)`
//! wrappers are looked through, and any identifier followed by `(` that is itself preceded by
//! a type (an identifier or `*`) at the top level is a declaration.

use std::collections::BTreeMap;

/// What the header declares.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Api {
    /// Every declared function with the normalised type of each parameter (`const struct
    /// llama_vocab * vocab` becomes `llama_vocab*`).
    pub functions: BTreeMap<String, Vec<String>>,
    /// Every `struct name { ... }` with its field names, in order.
    pub structs: BTreeMap<String, Vec<String>>,
}

impl Api {
    pub fn has(&self, function: &str) -> bool {
        self.functions.contains_key(function)
    }

    pub fn arity(&self, function: &str) -> Option<usize> {
        self.functions.get(function).map(Vec::len)
    }

    pub fn has_field(&self, strukt: &str, field: &str) -> bool {
        self.structs
            .get(strukt)
            .is_some_and(|f| f.iter().any(|x| x == field))
    }

    /// The `cfg` flags the wrapper is compiled with, one per fact: `llama_fn="name"`,
    /// `llama_arity="name:N"`, `llama_param0="name:type"` (the first parameter's type) and
    /// `llama_field="struct.field"`.
    pub fn cfgs(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (name, params) in &self.functions {
            out.push(format!("llama_fn=\"{name}\""));
            out.push(format!("llama_arity=\"{name}:{}\"", params.len()));
            if let Some(p) = params.first() {
                out.push(format!("llama_param0=\"{name}:{p}\""));
            }
        }
        for (s, fields) in &self.structs {
            for f in fields {
                out.push(format!("llama_field=\"{s}.{f}\""));
            }
        }
        out
    }
}

/// Removes comments and preprocessor lines, keeping line structure irrelevant.
fn strip(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let b = text.as_bytes();
    let mut i = 0;
    let mut line_start = true;
    while i < b.len() {
        if line_start {
            let rest = &text[i..];
            let trimmed = rest.trim_start_matches([' ', '\t']);
            if trimmed.starts_with('#') {
                // A preprocessor line, with its backslash continuations.
                let mut j = i;
                while j < b.len() {
                    if b[j] == b'\n' && (j == 0 || b[j - 1] != b'\\') {
                        break;
                    }
                    j += 1;
                }
                i = j;
                continue;
            }
        }
        if b[i] == b'/' && i + 1 < b.len() && b[i + 1] == b'/' {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if b[i] == b'/' && i + 1 < b.len() && b[i + 1] == b'*' {
            i += 2;
            while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                i += 1;
            }
            i += 2;
            out.push(' ');
            continue;
        }
        line_start = b[i] == b'\n';
        if b[i] == b'"' {
            // String literals (DEPRECATED's message) may hold parentheses: drop them.
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
            continue;
        }
        out.push(b[i] as char);
        i += 1;
    }
    out
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Punct(char),
}

fn tokens(text: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_alphanumeric() || c == '_' {
            let mut s = String::new();
            while let Some(&c) = chars.peek() {
                if c.is_alphanumeric() || c == '_' {
                    s.push(c);
                    chars.next();
                } else {
                    break;
                }
            }
            out.push(Tok::Ident(s));
        } else {
            if !c.is_whitespace() {
                out.push(Tok::Punct(c));
            }
            chars.next();
        }
    }
    out
}

/// Words that look like identifiers but never name a type before a declared function.
const NOT_TYPES: [&str; 6] = ["return", "sizeof", "if", "while", "DEPRECATED", "LLAMA_API"];

/// The normalised type of one parameter: qualifiers and `struct` dropped, the parameter's own
/// name dropped, pointers kept (`llama_vocab*`, `char**`, `float`).
fn param_type(toks: &[Tok]) -> String {
    let mut words: Vec<String> = Vec::new();
    for t in toks {
        match t {
            Tok::Ident(s) if s == "const" || s == "struct" || s == "enum" => {}
            Tok::Ident(s) => words.push(s.clone()),
            Tok::Punct('*') => words.push("*".into()),
            Tok::Punct('[') | Tok::Punct(']') => {}
            Tok::Punct(c) => words.push(c.to_string()),
        }
    }
    // The last identifier is the parameter's name when a type precedes it.
    let idents = words.iter().filter(|w| *w != "*").count();
    if idents >= 2 {
        if let Some(pos) = words.iter().rposition(|w| w != "*") {
            words.remove(pos);
        }
    }
    let mut out = String::new();
    for w in words {
        if w != "*" && !out.is_empty() && !out.ends_with('*') {
            out.push(' ');
        }
        out.push_str(&w);
    }
    out
}

/// Reads a header's declarations.
pub fn scan(header: &str) -> Api {
    let toks = tokens(&strip(header));
    let mut api = Api::default();
    let mut depth_brace = 0usize;
    let mut i = 0;
    while i < toks.len() {
        match &toks[i] {
            // `extern "C" {` (kept, since only its #ifdef is stripped) opens no scope; its
            // closing brace is absorbed by the saturating decrement.
            Tok::Ident(kw) if kw == "extern" && toks.get(i + 3) == Some(&Tok::Punct('{')) => {
                i += 4;
                continue;
            }
            Tok::Punct('{') => depth_brace += 1,
            Tok::Punct('}') => depth_brace = depth_brace.saturating_sub(1),
            Tok::Ident(kw) if kw == "struct" && depth_brace == 0 => {
                if let (Some(Tok::Ident(name)), Some(Tok::Punct('{'))) =
                    (toks.get(i + 1), toks.get(i + 2))
                {
                    let (fields, end) = struct_fields(&toks, i + 3);
                    api.structs.insert(name.clone(), fields);
                    i = end;
                    continue;
                }
            }
            Tok::Ident(name) if depth_brace == 0 && !NOT_TYPES.contains(&name.as_str()) => {
                let typed = i > 0
                    && match &toks[i - 1] {
                        Tok::Ident(prev) => !NOT_TYPES.contains(&prev.as_str()) && prev != "struct",
                        Tok::Punct('*') => true,
                        _ => false,
                    };
                if typed && toks.get(i + 1) == Some(&Tok::Punct('(')) {
                    if let Some((params, end)) = params(&toks, i + 2) {
                        // A declaration ends with `;` (or `)` inside DEPRECATED(...)).
                        if matches!(toks.get(end), Some(Tok::Punct(';' | ')' | ','))) {
                            api.functions.insert(name.clone(), params);
                        }
                        i = end;
                        continue;
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    api
}

/// The parameters from just after `(` to the matching `)`; returns them and the index after
/// the `)`. `(void)` and `()` are no parameters.
fn params(toks: &[Tok], start: usize) -> Option<(Vec<String>, usize)> {
    let mut depth = 1;
    let mut current: Vec<Tok> = Vec::new();
    let mut out = Vec::new();
    let mut i = start;
    while i < toks.len() {
        let t = &toks[i];
        match t {
            Tok::Punct('(') => depth += 1,
            Tok::Punct(')') => {
                depth -= 1;
                if depth == 0 {
                    if !current.is_empty() && current != [Tok::Ident("void".into())] {
                        out.push(param_type(&current));
                    }
                    return Some((out, i + 1));
                }
            }
            Tok::Punct(',') if depth == 1 => {
                out.push(param_type(&current));
                current.clear();
                i += 1;
                continue;
            }
            Tok::Punct('{' | '}' | ';') => return None,
            _ => {}
        }
        current.push(t.clone());
        i += 1;
    }
    None
}

/// Field names of a struct body starting after `{`; returns them and the index after `};`.
fn struct_fields(toks: &[Tok], start: usize) -> (Vec<String>, usize) {
    let mut fields = Vec::new();
    let mut decl: Vec<&Tok> = Vec::new();
    let mut depth = 0usize;
    let mut i = start;
    while i < toks.len() {
        match &toks[i] {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') if depth == 0 => return (fields, i + 1),
            Tok::Punct('}') => depth -= 1,
            Tok::Punct(';') if depth == 0 => {
                // A function-pointer field is `ret (*name)(args)`: its name follows `(*`.
                let name = decl
                    .windows(3)
                    .find_map(|w| match w {
                        [Tok::Punct('('), Tok::Punct('*'), Tok::Ident(n)] => Some(n.clone()),
                        _ => None,
                    })
                    .or_else(|| {
                        decl.iter().rev().find_map(|t| match t {
                            Tok::Ident(n) => Some(n.clone()),
                            _ => None,
                        })
                    });
                fields.extend(name);
                decl.clear();
                i += 1;
                continue;
            }
            _ => {}
        }
        if depth == 0 {
            decl.push(&toks[i]);
        }
        i += 1;
    }
    (fields, i)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = r#"
#ifndef LLAMA_H
#define LLAMA_API __attribute__ ((visibility ("default")))
#define DEPRECATED(func, hint) func __attribute__((deprecated(hint)))
#ifdef __cplusplus
extern "C" {
#endif
    typedef bool (*llama_progress_callback)(float progress, void * user_data);
    struct llama_sampler_i {
        const char *           (*name)  (const struct llama_sampler * smpl); // can be NULL
        void                   (*accept)(      struct llama_sampler * smpl, llama_token token);
    };
    struct llama_context_params {
        uint32_t n_ctx;             // text context, 0 = from model
        enum llama_flash_attn_type flash_attn_type; // when to enable
        ggml_abort_callback abort_callback;
    };
    /* a block comment with llama_fake(int x); inside */
    LLAMA_API struct llama_sampler * llama_sampler_init_penalties(
                             int32_t   n_vocab,       // llama_n_vocab()
                               float   penalty_present); // 0.0 = disabled
    LLAMA_API struct llama_sampler * llama_sampler_init_dry(
            const struct llama_vocab *  vocab,
                         const char ** seq_breakers,
                              size_t   num_breakers);
    LLAMA_API int64_t llama_time_us(void);
    DEPRECATED(LLAMA_API int32_t llama_n_vocab(const struct llama_vocab * vocab), "use llama_vocab_n_tokens (x)");
    LLAMA_API const char * ggml_version(void);
    LLAMA_API void llama_backend_init();
#ifdef __cplusplus
}
#endif
#endif
"#;

    #[test]
    fn functions_their_parameters_and_struct_fields_are_read() {
        let api = scan(HEADER);
        let names: Vec<&str> = api.functions.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "ggml_version",
                "llama_backend_init",
                "llama_n_vocab",
                "llama_sampler_init_dry",
                "llama_sampler_init_penalties",
                "llama_time_us"
            ]
        );
        assert_eq!(
            api.functions["llama_sampler_init_penalties"],
            ["int32_t", "float"]
        );
        assert_eq!(
            api.functions["llama_sampler_init_dry"],
            ["llama_vocab*", "char**", "size_t"]
        );
        assert_eq!(api.arity("llama_time_us"), Some(0));
        assert_eq!(api.functions["llama_n_vocab"], ["llama_vocab*"]);
        assert_eq!(api.structs["llama_sampler_i"], ["name", "accept"]);
        assert!(api.has_field("llama_context_params", "flash_attn_type"));
        assert!(!api.has_field("llama_context_params", "flash_attn"));
        assert!(!api.has("llama_fake"));
        let cfgs = api.cfgs();
        assert!(cfgs.contains(&"llama_arity=\"llama_sampler_init_penalties:2\"".to_string()));
        assert!(cfgs.contains(&"llama_param0=\"llama_sampler_init_dry:llama_vocab*\"".to_string()));
        assert!(cfgs.contains(&"llama_field=\"llama_context_params.n_ctx\"".to_string()));
    }
}
