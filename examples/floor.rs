//! The floor the pipeline's and `verify`'s speed is measured against (docs/speed.md): the
//! least work that reads an event log the way stateval must, with general-purpose crates
//! and nothing of stateval's own.
//!
//! `cargo run --release --example floor -- MODE LOG...`, then `target/release/examples/floor
//! MODE LOG...` in timed rounds. Every non-empty line of every LOG is one event.
//!
//! - `hash`: blake3 of each raw line, no parse.
//! - `parse`: `serde_json` parses each line into a `Value`; blake3 of the raw line.
//! - `canon-hash`: parse, take the `hash` member out, write the rest back with sorted keys
//!   (`serde_json`'s map is ordered), blake3 in derive-key mode under the event context
//!   (`stateval event v1`) and compare with the line's `hash`: what `verify` does per event.
//! - `hash-write`: no parse: hash each line without its `hash` member (found by its bytes)
//!   under the event context, compare, and write the line to `LOG.floor` (made afresh,
//!   fsync'd once written, as a run's logs are): the floor of a pipeline that writes
//!   canonical lines straight from typed events, which must hash and write every byte
//!   but need parse nothing. The copies are left for the caller to remove.
//!
//! Prints one line of counts; `hash_mismatches` is the lines whose hash was not reproduced
//! (0 on a log stateval wrote). Exit 2 on a bad argument or an unreadable file or line.

use std::io::Read as _;

/// What one pass over the logs counted.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub files: usize,
    pub lines: u64,
    pub bytes: u64,
    pub hash_mismatches: u64,
    /// A byte folded from every digest, printed so the work cannot be optimised away.
    pub fold: u8,
}

pub const MODES: [&str; 4] = ["hash", "parse", "canon-hash", "hash-write"];
const EVENT_CONTEXT: &str = "stateval event v1";

pub fn floor(mode: &str, files: &[String]) -> Result<Tally, String> {
    if !MODES.contains(&mode) {
        return Err(format!("unknown mode {mode:?}: expected one of {}", MODES.join(", ")));
    }
    let mut tally = Tally { files: files.len(), ..Tally::default() };
    let mut text = Vec::new();
    let mut canonical = Vec::with_capacity(1 << 12);
    for file in files {
        text.clear();
        std::fs::File::open(file).and_then(|mut f| f.read_to_end(&mut text)).map_err(|e| format!("{file}: {e}"))?;
        tally.bytes += text.len() as u64;
        if mode == "hash-write" {
            hash_write(file, &text, &mut tally)?;
            continue;
        }
        for (at, line) in text.split(|&b| b == b'\n').enumerate() {
            if line.is_empty() {
                continue;
            }
            tally.lines += 1;
            if mode == "hash" {
                tally.fold ^= blake3::hash(line).as_bytes()[0];
                continue;
            }
            let mut event: serde_json::Value =
                serde_json::from_slice(line).map_err(|e| format!("{file}:{}: not JSON: {e}", at + 1))?;
            if mode == "parse" {
                tally.fold ^= blake3::hash(line).as_bytes()[0] ^ u8::from(event.is_object());
                continue;
            }
            let claimed = event.as_object_mut().and_then(|m| m.remove("hash"));
            canonical.clear();
            serde_json::to_writer(&mut canonical, &event).map_err(|e| format!("{file}:{}: {e}", at + 1))?;
            let digest = blake3::Hasher::new_derive_key(EVENT_CONTEXT).update(&canonical).finalize();
            let matches = claimed
                .as_ref()
                .and_then(serde_json::Value::as_str)
                .and_then(|h| h.strip_prefix("blake3:"))
                .is_some_and(|hex| hex == digest.to_hex().as_str());
            tally.hash_mismatches += u64::from(!matches);
            tally.fold ^= digest.as_bytes()[0];
        }
    }
    Ok(tally)
}

/// `hash-write` of one log: every line hashed as it was hashed when written (the line
/// without its `,"hash":"blake3:…"` member) and written to `FILE.floor`, in writes of
/// about 64 KiB as a run makes them.
fn hash_write(file: &str, text: &[u8], tally: &mut Tally) -> Result<(), String> {
    use std::io::Write as _;
    const MEMBER: &[u8] = b",\"hash\":\"blake3:";
    let copy = format!("{file}.floor");
    let mut out = std::fs::File::create(&copy).map_err(|e| format!("{copy}: {e}"))?;
    let mut pending = Vec::with_capacity(128 << 10);
    let hasher = blake3::Hasher::new_derive_key(EVENT_CONTEXT);
    let finder = memchr::memmem::Finder::new(MEMBER);
    let mut start = 0;
    let ends = memchr::memchr_iter(b'\n', text).chain((text.last() != Some(&b'\n')).then_some(text.len()));
    for (at, end) in ends.enumerate() {
        let line = &text[start..end];
        start = end + 1;
        if line.is_empty() {
            continue;
        }
        tally.lines += 1;
        let found = finder.find(line);
        let Some(member) = found.filter(|&m| line.len() >= m + MEMBER.len() + 65) else {
            return Err(format!("{file}:{}: no hash member", at + 1));
        };
        let (hex_at, end) = (member + MEMBER.len(), member + MEMBER.len() + 65);
        let digest = hasher.clone().update(&line[..member]).update(&line[end..]).finalize();
        tally.hash_mismatches += u64::from(digest.to_hex().as_bytes() != &line[hex_at..end - 1]);
        tally.fold ^= digest.as_bytes()[0];
        pending.extend_from_slice(line);
        pending.push(b'\n');
        if pending.len() >= 64 << 10 {
            out.write_all(&pending).map_err(|e| format!("{copy}: {e}"))?;
            pending.clear();
        }
    }
    out.write_all(&pending).and_then(|()| out.sync_all()).map_err(|e| format!("{copy}: {e}"))
}

#[allow(dead_code)] // a test includes this file for `floor` alone
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((mode, files)) = args.split_first().filter(|(_, files)| !files.is_empty()) else {
        eprintln!("usage: floor {} LOG...", MODES.join("|"));
        std::process::exit(2)
    };
    match floor(mode, files) {
        Ok(t) => println!(
            "mode={mode} files={} lines={} bytes={} hash_mismatches={} fold={}",
            t.files, t.lines, t.bytes, t.hash_mismatches, t.fold
        ),
        Err(e) => {
            eprintln!("floor: {e}");
            std::process::exit(2)
        }
    }
}
