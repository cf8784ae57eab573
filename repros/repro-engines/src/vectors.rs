//! The logit vectors of the audit grid and the configurations each is drawn under
//! (PREREG, F7: the domain).

use engine::Sampling;
use oracle::rng::Rng;

#[derive(Debug, Clone, PartialEq)]
pub struct Vector {
    pub name: &'static str,
    pub logits: Vec<f32>,
}

/// Entries of the vocabulary-sized vector: Gemma3's vocabulary.
pub const VOCAB: usize = 262_144;

/// A vocabulary-sized vector: 16 head ids (placed by a seeded generator) with logits
/// 14, 13.5, ..., 6.5, and every other id uniform in [-4, 0) from the same generator.
pub fn vocab_vector() -> Vec<f32> {
    let mut rng = Rng::new(262_144);
    let mut logits: Vec<f32> = (0..VOCAB)
        .map(|_| -4.0 * (rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32)
        .collect();
    for j in 0..16 {
        let id = rng.below(VOCAB);
        logits[id] = 14.0 - j as f32 / 2.0;
    }
    logits
}

/// Every vector of the grid, the vocabulary-sized one last.
pub fn all() -> Vec<Vector> {
    small().into_iter().chain([vocab()]).collect()
}

fn vocab() -> Vector {
    let logits = vocab_vector();
    Vector {
        name: "vocab262k",
        logits,
    }
}

/// The vectors short enough to print.
fn small() -> Vec<Vector> {
    let ninf = f32::NEG_INFINITY;
    let vectors = [
        // Distinct logits (the interface example).
        ("published", vec![3.0, 2.0, 1.0, 0.0]),
        // A three-way tie at the top and a two-way tie below it.
        ("ties", vec![1.0, 1.0, 1.0, 0.0, 0.0, -1.0]),
        // Every probability is 1/4 (1/8), so cum == p holds exactly at p = 0.5 (0.75).
        ("boundary4", vec![0.0; 4]),
        ("boundary8", vec![0.0; 8]),
        // Two -inf entries among four finite ones.
        ("masked", vec![2.0, ninf, 1.0, ninf, 0.0, 0.5]),
    ];
    let vector = |(name, logits)| Vector { name, logits };
    vectors.into_iter().map(vector).collect()
}

#[derive(Debug, Clone, PartialEq)]
pub struct GridRow {
    pub vector: &'static str,
    pub sampling: Sampling,
    pub draws: usize,
}

/// Draws per configuration on the small vectors, and on the vocabulary-sized one (where one
/// draw refills and walks an array of 262,144 entries in every engine; PREREG, F7).
/// top_p alone is not drawn on that vector: the oracle's rounding bound for a sum of n f32
/// probabilities, 8(n+2) ulp, is about 0.25 at n = 262,144, so no cut is decided there.
pub const DRAWS: usize = 20_000;
pub const DRAWS_VOCAB: usize = 1_000;

/// The audit grid, in a fixed order (PREREG, F7). Rows added later come last, so every row
/// keeps its seed (its position plus one).
pub fn grid() -> Vec<GridRow> {
    let rows: [(&str, &str); 24] = [
        ("published", "all"),
        ("published", "top_k=3"),
        ("published", "top_k=2"),
        ("published", "top_p=0.9"),
        ("published", "top_k=3,top_p=0.9"),
        ("published", "all,temp=0.5"),
        ("published", "min_p=0.1"),
        ("ties", "top_k=2"),
        ("ties", "top_p=0.5"),
        ("boundary4", "top_p=0.5"),
        ("boundary8", "top_p=0.75"),
        ("masked", "all"),
        ("masked", "top_k=2"),
        ("masked", "top_p=0.9"),
        ("vocab262k", "all"),
        ("vocab262k", "top_k=40"),
        ("vocab262k", "top_k=40,top_p=0.9"),
        // Temperatures other than 1 before each truncating stage: at 2, top_p=0.9 and
        // min_p=0.1 keep all four ids, where the untempered cuts keep three.
        ("published", "top_k=3,temp=0.5"),
        ("published", "top_p=0.9,temp=0.5"),
        ("published", "min_p=0.1,temp=0.5"),
        ("published", "top_k=3,temp=2"),
        ("published", "top_p=0.9,temp=2"),
        ("published", "min_p=0.1,temp=2"),
        // A split tie below a whole one: three ids of logit 1 kept, one of the two of logit 0.
        ("ties", "top_k=4"),
    ];
    rows.iter()
        .map(|(v, s)| GridRow {
            vector: v,
            sampling: Sampling::parse(s).expect("the grid's configurations parse"),
            draws: if *v == "vocab262k" {
                DRAWS_VOCAB
            } else {
                DRAWS
            },
        })
        .collect()
}

/// One vector by name; the vocabulary-sized one is generated only when it is the one named.
pub fn by_name(name: &str) -> Option<Vector> {
    if name == "vocab262k" {
        return Some(vocab());
    }
    small().into_iter().find(|v| v.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grid_names_known_vectors_and_the_big_vector_has_its_head() {
        let names: Vec<&str> = all().iter().map(|v| v.name).collect();
        for r in grid() {
            assert!(names.contains(&r.vector), "{}", r.vector);
        }
        let v = vocab_vector();
        assert_eq!(v.len(), VOCAB);
        assert_eq!(v.iter().filter(|&&x| x >= 6.5).count(), 16);
        assert!(v.iter().all(|x| (-4.0..=14.0).contains(x)));
    }
}
