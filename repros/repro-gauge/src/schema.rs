//! The keys and types a JSON answer must have, and how an answer is read out of model text.

use anyhow::{bail, ensure, Result};
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    String,
    Integer,
    Number,
    Boolean,
    Array,
    Object,
}

impl Kind {
    fn parse(t: &str) -> Result<Kind> {
        Ok(match t.trim() {
            "string" => Kind::String,
            "integer" => Kind::Integer,
            "number" => Kind::Number,
            "boolean" => Kind::Boolean,
            "array" => Kind::Array,
            "object" => Kind::Object,
            other => bail!("unknown type '{other}'"),
        })
    }

    fn matches(self, v: &Value) -> bool {
        match self {
            Kind::String => v.is_string(),
            Kind::Integer => v.is_i64() || v.is_u64(),
            Kind::Number => v.is_number(),
            Kind::Boolean => v.is_boolean(),
            Kind::Array => v.is_array(),
            Kind::Object => v.is_object(),
        }
    }

    fn rule(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::Integer => "integer",
            Kind::Number => "number",
            Kind::Boolean => "boolean",
            Kind::Array => "array",
            Kind::Object => "object",
        }
    }
}

/// `{k:t,...}`, `[{k:t,...}]` or `[t]`.
#[derive(Debug, Clone, PartialEq)]
pub enum Schema {
    Object(Vec<(String, Kind)>),
    ArrayOfObjects(Vec<(String, Kind)>),
    ArrayOf(Kind),
}

fn fields(inner: &str) -> Result<Vec<(String, Kind)>> {
    inner
        .split(',')
        .map(|kv| {
            let (k, t) = kv
                .split_once(':')
                .ok_or_else(|| anyhow::anyhow!("'{kv}' is not key:type"))?;
            ensure!(!k.trim().is_empty(), "empty key in '{kv}'");
            Ok((k.trim().to_string(), Kind::parse(t)?))
        })
        .collect()
}

impl Schema {
    pub fn parse(text: &str) -> Result<Schema> {
        let t = text.trim();
        if let Some(inner) = t.strip_prefix("[{").and_then(|x| x.strip_suffix("}]")) {
            return Ok(Schema::ArrayOfObjects(fields(inner)?));
        }
        if let Some(inner) = t.strip_prefix('{').and_then(|x| x.strip_suffix('}')) {
            return Ok(Schema::Object(fields(inner)?));
        }
        if let Some(inner) = t.strip_prefix('[').and_then(|x| x.strip_suffix(']')) {
            return Ok(Schema::ArrayOf(Kind::parse(inner)?));
        }
        bail!("schema '{t}' is not {{..}}, [{{..}}] or [type]")
    }

    pub fn accepts(&self, v: &Value) -> bool {
        let has = |obj: &Value, f: &[(String, Kind)]| {
            obj.as_object().is_some_and(|o| {
                f.iter()
                    .all(|(k, kind)| o.get(k).is_some_and(|x| kind.matches(x)))
            })
        };
        match self {
            Schema::Object(f) => has(v, f),
            Schema::ArrayOfObjects(f) => v
                .as_array()
                .is_some_and(|a| !a.is_empty() && a.iter().all(|x| has(x, f))),
            Schema::ArrayOf(kind) => v
                .as_array()
                .is_some_and(|a| !a.is_empty() && a.iter().all(|x| kind.matches(x))),
        }
    }

    /// A GBNF grammar (root rule `root`) whose every complete string is a JSON value this
    /// schema accepts: the listed keys in the listed order, arrays of one item or more.
    pub fn grammar(&self) -> String {
        let root = match self {
            Schema::Object(f) => format!("root ::= {}\n", fields_rule(f)),
            Schema::ArrayOfObjects(f) => format!(
                "root ::= \"[\" ws entry (ws \",\" ws entry){{0,4}} ws \"]\"\nentry ::= {}\n",
                fields_rule(f)
            ),
            Schema::ArrayOf(kind) => format!(
                "root ::= \"[\" ws {0} (ws \",\" ws {0}){{0,11}} ws \"]\"\n",
                kind.rule()
            ),
        };
        root + GRAMMAR_BASE
    }
}

/// The GBNF rules every schema grammar shares. Lengths are bounded (strings up to 48
/// characters, nested arrays up to 8 items, objects up to 6 members, whitespace up to 12
/// characters; top-level arrays: 5 objects or 12 scalars) so that a greedy walk through the
/// grammar always ends. Integers have no `-0`, which JSON readers take for a float.
const GRAMMAR_BASE: &str = r#"ws ::= [ \t\n]{0,12}
string ::= "\"" char{0,48} "\""
char ::= [^"\\\x7F\x00-\x1F] | "\\" ["\\/bfnrt]
integer ::= "0" | "-"? [1-9] [0-9]{0,9}
number ::= integer ("." [0-9]{1,6})?
boolean ::= "true" | "false"
scalar ::= string | number | boolean | "null"
object ::= "{" ws (string ws ":" ws scalar (ws "," ws string ws ":" ws scalar){0,5})? ws "}"
item ::= scalar | object
array ::= "[" ws (item (ws "," ws item){0,7})? ws "]"
"#;

/// `{"k1": T1, "k2": T2}` with exactly these keys in this order.
fn fields_rule(f: &[(String, Kind)]) -> String {
    let members: Vec<String> = f
        .iter()
        .map(|(k, kind)| format!("\"\\\"{k}\\\"\" ws \":\" ws {}", kind.rule()))
        .collect();
    format!("\"{{\" ws {} ws \"}}\"", members.join(" ws \",\" ws "))
}

/// The first JSON value in `text`: parsing starts at the first `{` or `[` and may leave text
/// after the value (models add prose and code fences). `None` if that does not parse.
pub fn extract(text: &str) -> Option<Value> {
    let start = text.find(['{', '['])?;
    serde_json::Deserializer::from_str(&text[start..])
        .into_iter::<Value>()
        .next()?
        .ok()
}

/// A token is structural when its text, whitespace aside, is only JSON delimiters
/// (`{ } [ ] , : "`, alone or merged, e.g. `",` or `{"`).
pub fn is_structural(piece: &str) -> bool {
    let t = piece.trim();
    !t.is_empty() && t.chars().all(|c| "{}[],:\"".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(text: &str) -> serde_json::Value {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn schemas_parse_and_judge() {
        let s = Schema::parse("{name:string,age:integer}").unwrap();
        assert!(s.accepts(&v(r#"{"name": "a", "age": 3, "x": 1}"#)));
        assert!(!s.accepts(&v(r#"{"name": "a", "age": 3.5}"#)));
        assert!(!s.accepts(&v(r#"{"name": "a"}"#)));
        let a = Schema::parse("[{t:string}]").unwrap();
        assert!(a.accepts(&v(r#"[{"t": "x"}, {"t": "y"}]"#)));
        assert!(!a.accepts(&v(r#"[]"#)));
        let p = Schema::parse("[integer]").unwrap();
        assert!(p.accepts(&v(r#"[2, 3]"#)));
        assert!(!p.accepts(&v(r#"[2, "3"]"#)));
        assert!(Schema::parse("{a:float}").is_err());
        assert!(Schema::parse("a:string").is_err());
    }

    #[test]
    fn extraction_skips_prose_and_fences() {
        let got = extract("Sure!\n```json\n{\"a\": [1, 2]}\n```\nDone.").unwrap();
        assert_eq!(got, v(r#"{"a": [1, 2]}"#));
        assert!(extract("{\"a\": 1").is_none());
        assert!(extract("no json here").is_none());
    }

    #[test]
    fn structural_tokens() {
        for t in ["{", " }", "\",", "{\"", "\"]", "},", ":", " \""] {
            assert!(is_structural(t), "{t:?}");
        }
        for t in ["a", " name", "\n", "1,", ""] {
            assert!(!is_structural(t), "{t:?}");
        }
    }
}
