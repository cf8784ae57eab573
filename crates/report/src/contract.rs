//! The contract a `defect` verdict rests on, found in the sources of the build it ran on.
//!
//! A defect is the engine breaking its own documented contract or an invariant its code
//! states, so every defect row quotes that statement with its file and line. The quote is not
//! typed into the report: the catalog ([`crate::kind`]) names the words to look for
//! ([`Quote`]), and [`locate`] finds them in the very sources the binary was compiled from
//! ([`Sources`], embedded by the engine's build script). A build whose sources do not state
//! the contract gets no defect verdict for that row (see [`crate::Report::add_row`]).

use serde::Serialize;

/// The source files of the build a report was made on: `(path, text)` with the path relative
/// to the engine's source root (`include/llama.h`, `src/llama-sampler.cpp`), embedded in the
/// binary by the engine's build script.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Sources(pub &'static [(&'static str, &'static str)]);

impl Sources {
    /// No sources: a report made without any (a test's), on which no contract can be found.
    pub const NONE: Sources = Sources(&[]);

    /// The paths held, in order.
    pub fn paths(&self) -> impl Iterator<Item = &'static str> {
        self.0.iter().map(|(p, _)| *p)
    }
}

// The texts are long; a debug print names the files only.
impl std::fmt::Debug for Sources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.paths()).finish()
    }
}

/// Where to look for a statement and what it says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quote {
    /// The file, by every path it has had (the sampler source was `src/llama-sampling.cpp`
    /// before it became `src/llama-sampler.cpp`); the first the build holds is searched.
    pub files: &'static [&'static str],
    /// When set, the quote must lie inside the C function whose definition line contains
    /// this text: from that line to the next line that is `}` alone.
    pub within: Option<&'static str>,
    /// Words that one line of the file contains.
    pub text: &'static str,
}

/// llama.cpp's public header.
pub const LLAMA_H: &[&str] = &["include/llama.h"];
/// llama.cpp's sampler source, under both of its names.
pub const LLAMA_SAMPLERS: &[&str] = &["src/llama-sampler.cpp", "src/llama-sampling.cpp"];
/// candle-transformers' sampling module.
pub const CANDLE_GENERATION: &[&str] = &["src/generation/mod.rs"];

impl Quote {
    pub const fn header(text: &'static str) -> Quote {
        Quote {
            files: LLAMA_H,
            within: None,
            text,
        }
    }

    pub const fn samplers(within: &'static str, text: &'static str) -> Quote {
        Quote {
            files: LLAMA_SAMPLERS,
            within: Some(within),
            text,
        }
    }
}

/// A contract as the build states it: the file, the 1-based line, and that line's text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Contract {
    pub file: String,
    pub line: usize,
    pub quote: String,
}

impl Contract {
    /// `file:line: "quote"`, as reports print it.
    pub fn cite(&self) -> String {
        format!("{}:{}: \"{}\"", self.file, self.line, self.quote)
    }
}

/// The first of `quotes` the build's sources state, located; `None` when none is there.
pub fn locate(sources: &Sources, quotes: &[Quote]) -> Option<Contract> {
    quotes.iter().find_map(|q| locate_one(sources, q))
}

fn locate_one(sources: &Sources, q: &Quote) -> Option<Contract> {
    let (path, text) = q
        .files
        .iter()
        .find_map(|f| sources.0.iter().find(|(p, _)| p == f))?;
    locate_in(path, text, q.within, q.text)
}

/// `quote` in the file `path` whose content is `text`, inside the C function whose definition
/// line contains `within` when that is given (see [`Quote`]).
pub fn locate_in(path: &str, text: &str, within: Option<&str>, quote: &str) -> Option<Contract> {
    let lines: Vec<&str> = text.lines().collect();
    let (from, to) = match within {
        None => (0, lines.len()),
        Some(anchor) => {
            let start = lines.iter().position(|l| l.contains(anchor))?;
            let end = (start..lines.len())
                .find(|&i| lines[i] == "}")
                .unwrap_or(lines.len());
            (start, end)
        }
    };
    let i = (from..to).find(|&i| lines[i].contains(quote))?;
    Some(Contract {
        file: path.to_string(),
        line: i + 1,
        quote: lines[i].trim().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "\
// header
static void a_apply(int x) {
    // copy the state
}

static void b_clone(int x) {
    int y = x;
    // copy the state
}
";

    fn sources() -> Sources {
        Sources(&[("src/llama-sampling.cpp", FILE)])
    }

    #[test]
    fn a_quote_is_found_inside_its_function_only_and_by_any_of_its_file_names() {
        let q = Quote::samplers("static void b_clone(", "// copy the state");
        let c = locate(&sources(), &[q]).unwrap();
        assert_eq!((c.file.as_str(), c.line), ("src/llama-sampling.cpp", 8));
        assert_eq!(c.quote, "// copy the state");
        assert_eq!(c.cite(), "src/llama-sampling.cpp:8: \"// copy the state\"");
        // The function that does not say it, and a function the file lacks, find nothing.
        let none = Quote::samplers("static void b_clone(", "int z");
        assert_eq!(locate(&sources(), &[none]), None);
        let missing = Quote::samplers("static void c_clone(", "// copy the state");
        assert_eq!(locate(&sources(), &[missing]), None);
        // The first alternative the build states wins.
        let c = locate(&sources(), &[missing, none, q]).unwrap();
        assert_eq!(c.line, 8);
        assert_eq!(locate(&Sources::NONE, &[q]), None);
    }

    #[test]
    fn a_quote_outside_any_function_searches_the_whole_file() {
        let q = Quote {
            files: LLAMA_SAMPLERS,
            within: None,
            text: "copy the state",
        };
        assert_eq!(locate(&sources(), &[q]).unwrap().line, 3);
        assert_eq!(format!("{:?}", sources()), "[\"src/llama-sampling.cpp\"]");
    }
}
