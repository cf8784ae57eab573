//! The wrapper's promises, on whichever build links it: handles are freed once (chains own
//! their stages), bad input is refused before it reaches C, and the array header is reported
//! as llama.cpp left it.

use oracle::penalty::PenaltyParams;
use oracle::stage::Stage;
use oracle::window::WindowLen;
use subject::{BuildInfo, Candidates, DryParams, Sampler, SamplerSpec, TokenId};

fn penalties(last_n: usize) -> SamplerSpec {
    let params = PenaltyParams {
        repeat: 1.5,
        freq: 0.5,
        present: 0.25,
    };
    SamplerSpec::penalties(8, WindowLen(last_n), params)
}

#[test]
fn build_is_named() {
    let b = BuildInfo::current();
    assert!(b.crate_version.starts_with("0.1."), "{b:?}");
    // The name is the llama.cpp tag (or commit), never the crate's version.
    assert!(b.name.starts_with('b') || b.name.len() == 7, "{b:?}");
    assert_eq!(b.sources_sha256.len(), 64);
}

#[test]
fn chains_own_their_stages_and_clone_cleanly() {
    // Built, applied, cloned and dropped many times: a double free or leak of a stage would
    // crash here or under a sanitizer.
    for _ in 0..200 {
        let stages = vec![
            penalties(4).build().unwrap(),
            SamplerSpec::from(Stage::TopK { k: 3 }).build().unwrap(),
            SamplerSpec::Dist { seed: 7 }.build().unwrap(),
        ];
        let mut chain = Sampler::chain(stages).unwrap();
        chain.accept(TokenId(1)).unwrap();
        let mut c = Candidates::from_logits(&[0.5, 2.0, -1.0, 1.0, 0.0, 0.25, 3.0, -2.0]);
        chain.apply(&mut c).unwrap();
        assert_eq!(c.len(), 3);
        assert!(c.selected_id().is_some());
        let mut copy = chain.try_clone().unwrap();
        let mut d = Candidates::from_logits(&[0.5, 2.0, -1.0, 1.0, 0.0, 0.25, 3.0, -2.0]);
        copy.apply(&mut d).unwrap();
        copy.reset();
    }
}

#[test]
fn bad_input_is_refused_before_c() {
    // A negative window cannot be written (WindowLen is unsigned); a huge one is refused.
    let nan_p = Stage::TopP {
        p: f32::NAN,
        min_keep: 1,
    };
    let bias = SamplerSpec::from(Stage::LogitBias {
        biases: vec![(TokenId(4), 1.0)],
    });
    let dry = DryParams {
        multiplier: 1.0,
        base: 2.0,
        allowed_length: 2,
        last_n: -1,
        n_ctx_train: 16,
    };
    for (case, spec) in [
        (
            "window past the limit",
            penalties(subject::MAX_WINDOW as usize + 1),
        ),
        ("window of usize::MAX", penalties(usize::MAX)),
        ("NaN p", SamplerSpec::from(nan_p)),
        ("bias past the vocabulary", bias.clone().with_vocab(4)),
        ("bias with no vocabulary given", bias),
        ("negative dry window", SamplerSpec::Dry(dry)),
    ] {
        assert!(spec.build().is_err(), "{case}");
    }
    let mut s = penalties(4).build().unwrap();
    assert!(s.accept(TokenId(8)).is_err(), "id outside the vocabulary");
    assert!(s.accept(TokenId(-1)).is_err());
    assert!(
        s.apply(&mut Candidates::new([])).is_err(),
        "empty array aborts in softmax"
    );
    assert!(s
        .apply(&mut Candidates::from_logits(&[0.0, f32::NAN]))
        .is_err());
    let mut greedy = SamplerSpec::from(Stage::Greedy).build().unwrap();
    assert!(greedy.apply(&mut Candidates::new([])).is_err());
}

#[test]
fn header_fields_are_reported_as_left() {
    // penalties always clears `sorted`, even when it was true and nothing was penalized.
    let mut s = penalties(4).build().unwrap();
    s.accept(TokenId(2)).unwrap();
    let mut c = Candidates::from_logits(&[3.0, 2.0, 1.0, 0.0]);
    c.sorted = true;
    s.apply(&mut c).unwrap();
    assert!(!c.sorted);
    assert_eq!(c.logit_of(TokenId(2)), Some(1.0 / 1.5 - 0.5 - 0.25));
}

#[test]
fn xtc_window_inside_the_buffer_is_read() {
    // XTC with probability 1 and a low threshold drops the top candidates by advancing the
    // data pointer; the wrapper reads the remaining window.
    let xtc = Stage::Xtc {
        probability: 1.0,
        threshold: 0.01,
        min_keep: 1,
    };
    let mut s = SamplerSpec::from(xtc).with_seed(3).build().unwrap();
    let mut c = Candidates::from_logits(&[4.0, 3.0, 2.0, 1.0]);
    s.apply(&mut c).unwrap();
    assert!(c.len() < 4 && !c.is_empty(), "{c:?}");
    assert!(
        c.logit_of(TokenId(0)).is_none(),
        "the top candidate was excluded: {c:?}"
    );
}

fn smollm2() -> std::path::PathBuf {
    models::cache_dir().join(models::SMOLLM2.file)
}

#[test]
fn grammar_keeps_its_vocabulary_alive() {
    let vocab = subject::Vocab::load(&smollm2()).expect("run `make models` first");
    assert_eq!(vocab.n_tokens(), 49152);
    let ids: Vec<TokenId> = ["a", "b", "c"]
        .iter()
        .map(|l| vocab.tokenize(l).unwrap()[0])
        .collect();
    assert_eq!(vocab.piece(ids[1]).unwrap(), "b");
    let grammar = Sampler::grammar(&vocab, "root ::= \"b\"", "root").unwrap();
    // The chain holds the last reference once this one is gone; the grammar still works.
    drop(vocab);
    let mut chain = Sampler::chain(vec![grammar]).unwrap();
    let mut c = Candidates::new(ids.iter().map(|&id| (id, 1.0)));
    chain.apply(&mut c).unwrap();
    let alive: Vec<TokenId> = c
        .entries
        .iter()
        .filter(|e| e.logit > f32::NEG_INFINITY)
        .map(|e| e.id)
        .collect();
    assert_eq!(alive, vec![ids[1]]);
}

#[test]
fn missing_or_bad_vocabulary_is_an_error() {
    assert!(subject::Vocab::load(std::path::Path::new("/nonexistent.gguf")).is_err());
    let not_gguf = std::env::temp_dir().join("sampler-audit-not-a-model.gguf");
    std::fs::write(&not_gguf, b"definitely not gguf").unwrap();
    assert!(subject::Vocab::load(&not_gguf).is_err());
    let vocab = subject::Vocab::load(&smollm2()).expect("run `make models` first");
    assert!(Sampler::grammar(&vocab, "root ::= ", "nope").is_err());
}

/// llama.cpp throws a C++ exception when a grammar accepts a token it rejects; the wrapper
/// asks the grammar first and returns an error instead, for a bare grammar and inside a chain
/// (whose other stages' state the check must not touch).
#[test]
fn a_grammar_refuses_a_rejected_token_without_throwing() {
    let vocab = subject::Vocab::load(&smollm2()).expect("run `make models` first");
    let [a, b] = ["a", "b"].map(|l| vocab.tokenize(l).unwrap()[0]);
    let mut bare = Sampler::grammar(&vocab, "root ::= \"b\" \"a\"", "root").unwrap();
    assert!(bare.accept(a).is_err());
    bare.accept(b).unwrap();
    assert!(bare.accept(b).is_err());
    bare.accept(a).unwrap();
    let grammar = Sampler::grammar(&vocab, "root ::= \"b\"", "root").unwrap();
    let mut chain = Sampler::chain(vec![grammar]).unwrap();
    assert!(chain.accept(a).is_err());
    chain.accept(b).unwrap();
}

/// A stage that leaves the array as it is, told whatever vocabulary the test gives it.
struct Untouched;

impl subject::CustomSampler for Untouched {
    fn name(&self) -> &'static std::ffi::CStr {
        c"untouched"
    }

    fn apply(&mut self, _view: &mut subject::ArrayView<'_>) {}

    fn clone_sampler(&self) -> Box<dyn subject::CustomSampler> {
        Box::new(Untouched)
    }
}

/// A negative vocabulary bound (which only `custom_for_vocab` takes as given)
/// admits no id on every path: the row-length checks of `apply_in_id_order` and
/// `LogitsArray::apply` once cast it to `usize`, so it wrapped to a huge bound and ids
/// `0..n` reached C. Found by `tests/promise_fuzz.rs` (rules B3 and G4).
#[test]
fn a_negative_vocabulary_bound_admits_no_id() {
    let mut s = Sampler::custom_for_vocab(Untouched, i32::MIN).unwrap();
    let mut arr = subject::LogitsArray::new();
    arr.load(&[0.5, 1.5]).unwrap();
    let before = subject::ffi_calls_on_this_thread();
    assert!(s.apply_in_id_order(&[0.5, 1.5]).is_err());
    assert!(arr.apply(&mut s).is_err());
    assert!(s.apply(&mut Candidates::from_logits(&[0.5, 1.5])).is_err());
    assert!(s.accept(TokenId(0)).is_err());
    assert_eq!(
        subject::ffi_calls_on_this_thread(),
        before,
        "nothing reached C"
    );
    // A positive bound still admits the ids below it.
    let mut s = Sampler::custom_for_vocab(Untouched, 2).unwrap();
    assert_eq!(s.apply_in_id_order(&[0.5, 1.5]).unwrap(), [0.5, 1.5]);
    arr.apply(&mut s).unwrap();
}
