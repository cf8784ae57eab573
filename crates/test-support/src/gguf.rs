//! Mutated GGUF files for the `--model PATH` door: derived from a real model, each broken in
//! one way the loader must survive (a truncation at a header field, a huge count or length,
//! a wrong magic or version, flipped bytes), written into a folder the caller owns.
//!
//! The header is walked field by field (GGUF v3: magic, version, tensor count, key-value
//! count, the key-value pairs, the tensor infos), so truncations and huge values land exactly
//! on field boundaries. Most files keep only the header (the loader then also meets tensor
//! data beyond the end of the file); a few keep the whole file with flipped metadata bytes,
//! so loads that succeed are exercised too.

use oracle::rng::Rng;
use std::path::{Path, PathBuf};

/// One field of the header: where it starts, how long it is, and what it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub at: usize,
    pub len: usize,
    pub what: String,
}

struct Walker<'a> {
    b: &'a [u8],
    at: usize,
    fields: Vec<Field>,
}

impl Walker<'_> {
    fn take(&mut self, len: usize, what: impl Into<String>) -> Option<&[u8]> {
        let end = self.at.checked_add(len)?;
        let bytes = self.b.get(self.at..end)?;
        self.fields.push(Field {
            at: self.at,
            len,
            what: what.into(),
        });
        self.at = end;
        Some(bytes)
    }
    fn u32(&mut self, what: &str) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4, what)?.try_into().ok()?))
    }
    fn u64(&mut self, what: &str) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8, what)?.try_into().ok()?))
    }
    fn string(&mut self, what: &str) -> Option<()> {
        let n = self.u64(&format!("{what} length"))? as usize;
        self.take(n, format!("{what} bytes"))?;
        Some(())
    }
    /// A value of GGUF type `t`; arrays record only their first few elements as fields.
    fn value(&mut self, t: u32, what: &str, record: bool) -> Option<()> {
        let size = match t {
            0 | 1 | 7 => 1,
            2 | 3 => 2,
            4..=6 => 4,
            10..=12 => 8,
            8 => {
                let n = u64::from_le_bytes(self.b.get(self.at..self.at + 8)?.try_into().ok()?);
                if record {
                    return self.string(what);
                }
                self.at = self.at.checked_add(8 + n as usize)?;
                return Some(());
            }
            9 => {
                let et = self.u32(&format!("{what} element type"))?;
                let n = self.u64(&format!("{what} element count"))?;
                for i in 0..n {
                    self.value(et, &format!("{what}[{i}]"), record && i < 3)?;
                }
                return Some(());
            }
            _ => return None,
        };
        if record {
            self.take(size, what)?;
        } else {
            self.at = self.at.checked_add(size)?;
        }
        Some(())
    }
}

/// The header's fields in file order, and where the header ends.
pub fn fields(bytes: &[u8]) -> Option<(Vec<Field>, usize)> {
    let mut w = Walker {
        b: bytes,
        at: 0,
        fields: Vec::new(),
    };
    w.take(4, "magic")?;
    w.u32("version")?;
    let n_tensors = w.u64("tensor count")?;
    let n_kv = w.u64("key-value count")?;
    for i in 0..n_kv {
        w.string(&format!("key {i}"))?;
        let t = w.u32(&format!("key {i} type"))?;
        w.value(t, &format!("key {i} value"), true)?;
    }
    for i in 0..n_tensors {
        w.string(&format!("tensor {i} name"))?;
        let dims = w.u32(&format!("tensor {i} dims"))?;
        for d in 0..dims {
            w.u64(&format!("tensor {i} dim {d}"))?;
        }
        w.u32(&format!("tensor {i} type"))?;
        w.u64(&format!("tensor {i} offset"))?;
    }
    let end = w.at;
    Some((w.fields, end))
}

/// One mutated file: what was done, and where it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Mutant {
    pub label: String,
    pub path: PathBuf,
}

/// Writes at least `min` mutants of `src` into `dir` (deterministic for a `seed`).
pub fn mutants(src: &Path, dir: &Path, seed: u64, min: usize) -> std::io::Result<Vec<Mutant>> {
    let bytes = std::fs::read(src)?;
    let (fields, header_end) = fields(&bytes).ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidData, "not a GGUF v3 file")
    })?;
    let header = &bytes[..header_end];
    let stem = src.file_stem().and_then(|s| s.to_str()).unwrap_or("model");
    let mut out: Vec<Mutant> = Vec::new();
    let write = |out: &mut Vec<Mutant>, label: String, data: &[u8]| -> std::io::Result<()> {
        let path = dir.join(format!("{stem}-{:03}.gguf", out.len()));
        std::fs::write(&path, data)?;
        out.push(Mutant { label, path });
        Ok(())
    };
    let mut rng = Rng::new(seed);
    // Truncations at the start and the middle of header fields: the first 24 fields, then an
    // even spread of 16 over the rest.
    let stride = (fields.len() / 16).max(1);
    for (i, f) in fields.iter().enumerate() {
        if i < 24 || i % stride == 0 {
            write(
                &mut out,
                format!("cut at {} (byte {})", f.what, f.at),
                &bytes[..f.at],
            )?;
            if f.len > 1 {
                let mid = f.at + f.len / 2;
                write(
                    &mut out,
                    format!("cut inside {} (byte {mid})", f.what),
                    &bytes[..mid],
                )?;
            }
        }
    }
    write(&mut out, "cut after the header".into(), header)?;
    // Huge and nonsense values in every count, length, type and offset field we walked.
    let huge: [u64; 4] = [u64::MAX, 1 << 62, 1 << 40, 0xFFFF_FFFF];
    let numeric: Vec<&Field> = fields
        .iter()
        .filter(|f| {
            let ends = ["count", "length", "type", "dims", "offset"];
            ends.iter().any(|e| f.what.ends_with(e)) || f.what.contains(" dim ")
        })
        .collect();
    // The first 16 (the file's counts and the first keys), then 24 spread over the rest
    // (tensor infos included).
    let spread = (numeric.len() / 24).max(1);
    for f in numeric
        .iter()
        .enumerate()
        .filter(|(i, _)| *i < 16 || i % spread == 0)
        .map(|(_, f)| *f)
    {
        let v = *rng.pick(&huge);
        let mut h = header.to_vec();
        let le = v.to_le_bytes();
        h[f.at..f.at + f.len].copy_from_slice(&le[..f.len]);
        write(&mut out, format!("{} set to {v:#x}", f.what), &h)?;
    }
    // Wrong magic and versions.
    for (label, at, patch) in [
        ("magic GGUG", 0, &b"GGUG"[..]),
        ("magic zeroed", 0, &[0, 0, 0, 0][..]),
        ("version 0", 4, &[0, 0, 0, 0][..]),
        ("version 1", 4, &[1, 0, 0, 0][..]),
        ("version 999", 4, &[0xe7, 3, 0, 0][..]),
        ("version 0xffffffff", 4, &[0xff; 4][..]),
    ] {
        let mut h = header.to_vec();
        h[at..at + patch.len()].copy_from_slice(patch);
        write(&mut out, label.to_string(), &h)?;
    }
    // Flipped bytes in the header: single and burst flips, header only.
    while out.len() < min.saturating_sub(8) {
        let mut h = header.to_vec();
        let flips = 1 + rng.below(8);
        let mut where_ = Vec::new();
        for _ in 0..flips {
            let i = rng.below(h.len());
            h[i] ^= 1 << rng.below(8);
            where_.push(i);
        }
        write(
            &mut out,
            format!("header-only, bits flipped at bytes {where_:?}"),
            &h,
        )?;
    }
    // Whole files with flipped bytes, in the metadata and in the tensor data.
    for k in 0..8 {
        let mut b = bytes.clone();
        let i = if k % 2 == 0 {
            rng.below(header_end)
        } else {
            header_end + rng.below(b.len() - header_end)
        };
        b[i] ^= 0xff;
        write(&mut out, format!("whole file, byte {i} inverted"), &b)?;
    }
    write(&mut out, "empty file".into(), &[])?;
    write(&mut out, "the magic alone".into(), &bytes[..4])?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny GGUF: one u32 key, one string key, an array of two strings, one tensor.
    fn tiny() -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(b"GGUF");
        b.extend(3u32.to_le_bytes());
        b.extend(1u64.to_le_bytes());
        b.extend(3u64.to_le_bytes());
        let s = |b: &mut Vec<u8>, t: &str| {
            b.extend((t.len() as u64).to_le_bytes());
            b.extend(t.as_bytes());
        };
        s(&mut b, "a");
        b.extend(4u32.to_le_bytes());
        b.extend(7u32.to_le_bytes());
        s(&mut b, "name");
        b.extend(8u32.to_le_bytes());
        s(&mut b, "tiny");
        s(&mut b, "vocab");
        b.extend(9u32.to_le_bytes());
        b.extend(8u32.to_le_bytes());
        b.extend(2u64.to_le_bytes());
        s(&mut b, "x");
        s(&mut b, "yz");
        s(&mut b, "w");
        b.extend(1u32.to_le_bytes());
        b.extend(4u64.to_le_bytes());
        b.extend(0u32.to_le_bytes());
        b.extend(0u64.to_le_bytes());
        b
    }

    #[test]
    fn the_walker_finds_every_field_and_the_header_end() {
        let b = tiny();
        let (f, end) = fields(&b).unwrap();
        assert_eq!(end, b.len());
        let names: Vec<&str> = f.iter().map(|f| f.what.as_str()).collect();
        assert_eq!(
            &names[..4],
            ["magic", "version", "tensor count", "key-value count"]
        );
        assert!(names.contains(&"key 2 value element count"));
        assert!(names.contains(&"tensor 0 offset"));
        // Fields tile the header without gaps where they are recorded in full.
        assert_eq!(f[1].at, 4);
        assert_eq!(f[2].at, 8);
    }

    #[test]
    fn a_cut_file_is_not_a_whole_header() {
        let b = tiny();
        assert!(fields(&b[..b.len() - 1]).is_none());
    }
}
