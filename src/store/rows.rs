//! The bytes of one `cases` record: a chunk of a run's log and verdict rows.
//!
//! sled keeps every record a run writes in memory until the store closes, so a row is
//! as small as its facts allow: no run id or path (the key and the store give them),
//! a log head as its 32 digest bytes, numbers as LEB128 varints and turn offsets as the
//! steps between them (a 50-turn log's offsets take about 100 bytes rather than 350 as
//! JSON numbers).
//!
//! ```text
//! chunk   = "SV1" row*
//! row     = "L" str(case) uint(k) head uint(events) u8(complete) uint(n) uint(step){n}
//!         | "V" str(case) uint(k) str(dataset) u8(passed) str(status)
//! head    = 0x00 | 0x01 digest[32] | 0x02 str     (none, a blake3 digest, other text)
//! str     = uint(length) utf-8
//! ```

use crate::canon::Digest;

const MAGIC: &[u8] = b"SV1";

/// A log's record without its run: its turn offsets as steps from the one before.
#[derive(Debug, Clone, PartialEq)]
pub struct LogRow {
    pub case: String,
    pub k: usize,
    pub head: Option<String>,
    pub events: u64,
    pub complete: bool,
    pub steps: Vec<u64>,
}

/// A verdict's record without its run.
#[derive(Debug, Clone, PartialEq)]
pub struct VerdictRow {
    pub case: String,
    pub k: usize,
    pub dataset: String,
    pub passed: bool,
    pub status: String,
}

/// The rows of one record.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Chunk {
    pub logs: Vec<LogRow>,
    pub verdicts: Vec<VerdictRow>,
}

impl Chunk {
    pub fn rows(&self) -> usize {
        self.logs.len() + self.verdicts.len()
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(MAGIC.len() + self.logs.len() * 160 + self.verdicts.len() * 40);
        out.extend_from_slice(MAGIC);
        for log in &self.logs {
            out.push(b'L');
            text(&mut out, &log.case);
            uint(&mut out, log.k as u64);
            match log.head.as_deref().map(|h| (h, h.parse::<Digest>())) {
                None => out.push(0),
                // `parse` takes only the lowercase form `to_string` gives: it reads back the same
                Some((_, Ok(digest))) => {
                    out.push(1);
                    out.extend_from_slice(&digest.0);
                }
                Some((head, Err(_))) => {
                    out.push(2);
                    text(&mut out, head);
                }
            }
            uint(&mut out, log.events);
            out.push(u8::from(log.complete));
            uint(&mut out, log.steps.len() as u64);
            for &step in &log.steps {
                uint(&mut out, step);
            }
        }
        for v in &self.verdicts {
            out.push(b'V');
            text(&mut out, &v.case);
            uint(&mut out, v.k as u64);
            text(&mut out, &v.dataset);
            out.push(u8::from(v.passed));
            text(&mut out, &v.status);
        }
        out
    }

    /// The rows of a record, or what is wrong with its bytes.
    pub fn decode(bytes: &[u8]) -> Result<Chunk, String> {
        let mut r = Reader { bytes: bytes.strip_prefix(MAGIC).ok_or("not a chunk of catalog rows")?, at: MAGIC.len() };
        let mut chunk = Chunk::default();
        while let Some(tag) = r.next_byte() {
            match tag {
                b'L' => {
                    let case = r.text()?;
                    let k = r.index()?;
                    let head = match r.byte()? {
                        0 => None,
                        1 => Some(Digest(r.take(32)?.try_into().expect("32 bytes")).to_string()),
                        2 => Some(r.text()?),
                        other => return Err(r.error(&format!("a log head of kind {other}"))),
                    };
                    let events = r.uint()?;
                    let complete = r.flag()?;
                    let n = r.uint()?;
                    // a step takes a byte at least: a longer list is a corrupt count
                    if n > r.bytes.len() as u64 {
                        return Err(r.error("more turn offsets than bytes"));
                    }
                    let steps = (0..n).map(|_| r.uint()).collect::<Result<_, _>>()?;
                    chunk.logs.push(LogRow { case, k, head, events, complete, steps });
                }
                b'V' => {
                    let (case, k, dataset) = (r.text()?, r.index()?, r.text()?);
                    let (passed, status) = (r.flag()?, r.text()?);
                    chunk.verdicts.push(VerdictRow { case, k, dataset, passed, status });
                }
                other => return Err(r.error(&format!("a row of kind {other:#04x}"))),
            }
        }
        Ok(chunk)
    }
}

impl LogRow {
    /// Offsets only grow; steps wrap, so a record that says otherwise reads back the same.
    pub fn steps(offsets: &[u64]) -> Vec<u64> {
        let mut last = 0u64;
        offsets
            .iter()
            .map(|&at| {
                let step = at.wrapping_sub(last);
                last = at;
                step
            })
            .collect()
    }

    pub fn offsets(&self) -> Vec<u64> {
        let mut at = 0u64;
        self.steps
            .iter()
            .map(|&step| {
                at = at.wrapping_add(step);
                at
            })
            .collect()
    }
}

fn uint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn text(out: &mut Vec<u8>, s: &str) {
    uint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

struct Reader<'a> {
    bytes: &'a [u8],
    /// Offset of `bytes` in the record, for errors.
    at: usize,
}

impl Reader<'_> {
    fn error(&self, what: &str) -> String {
        format!("{what} at byte {}", self.at)
    }
    fn next_byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.bytes.split_first()?;
        self.bytes = rest;
        self.at += 1;
        Some(b)
    }
    fn byte(&mut self) -> Result<u8, String> {
        self.next_byte().ok_or_else(|| self.error("the record ends inside a row"))
    }
    fn flag(&mut self) -> Result<bool, String> {
        match self.byte()? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(self.error(&format!("a flag of {other}"))),
        }
    }
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        if self.bytes.len() < n {
            return Err(self.error("the record ends inside a row"));
        }
        let (taken, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        self.at += n;
        Ok(taken)
    }
    fn uint(&mut self) -> Result<u64, String> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            n |= u64::from(b & 0x7f)
                .checked_shl(shift)
                .filter(|_| shift < 63 || b <= 1)
                .ok_or_else(|| self.error("a number past 64 bits"))?;
            if b & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err(self.error("a number past 64 bits"))
    }
    fn index(&mut self) -> Result<usize, String> {
        let n = self.uint()?;
        usize::try_from(n).map_err(|_| self.error("a run index past this machine's word"))
    }
    fn text(&mut self) -> Result<String, String> {
        let n = self.uint()?;
        let n = usize::try_from(n)
            .ok()
            .filter(|&n| n <= self.bytes.len())
            .ok_or_else(|| self.error("a text longer than the record"))?;
        let at = self.at;
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| format!("text that is not UTF-8 at byte {at}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Chunk {
        Chunk {
            logs: vec![
                LogRow {
                    case: "case-00001".into(),
                    k: 0,
                    head: Some(crate::canon::digest(crate::canon::Context::Event, b"x").to_string()),
                    events: 252,
                    complete: true,
                    steps: LogRow::steps(&(0..50).map(|t| 180 + t * 2_113).collect::<Vec<u64>>()),
                },
                LogRow { case: "é".into(), k: 3, head: None, events: 0, complete: false, steps: vec![] },
                LogRow {
                    case: "x".into(),
                    k: 1,
                    head: Some("blake3:NOT-HEX".into()),
                    events: 1,
                    complete: true,
                    steps: vec![u64::MAX],
                },
            ],
            verdicts: vec![VerdictRow {
                case: "case-00001".into(),
                k: 0,
                dataset: "long".into(),
                passed: true,
                status: "completed".into(),
            }],
        }
    }

    #[test]
    fn a_chunk_reads_back_as_written() {
        assert_eq!(Chunk::decode(&sample().encode()), Ok(sample()));
        assert_eq!(Chunk::decode(&Chunk::default().encode()), Ok(Chunk::default()));
    }

    #[test]
    fn a_fifty_turn_case_takes_under_two_hundred_bytes() {
        let chunk = sample();
        let one = Chunk { logs: vec![chunk.logs[0].clone()], verdicts: chunk.verdicts.clone() };
        let bytes = one.encode().len() - MAGIC.len();
        assert!(bytes < 200, "{bytes} bytes");
    }

    #[test]
    fn damaged_records_are_refused_with_where() {
        let bytes = sample().encode();
        // every cut short of the whole is refused or reads as fewer whole rows
        for cut in MAGIC.len()..bytes.len() {
            if let Ok(chunk) = Chunk::decode(&bytes[..cut]) {
                assert!(chunk.logs.len() + chunk.verdicts.len() < 4, "cut at {cut} read every row");
            }
        }
        assert_eq!(Chunk::decode(b"{\"logs\":[]}"), Err("not a chunk of catalog rows".into()));
        assert_eq!(Chunk::decode(b"SV1Z"), Err("a row of kind 0x5a at byte 4".into()));
        assert_eq!(Chunk::decode(b"SV1L\x01a\x00\x07"), Err("a log head of kind 7 at byte 8".into()));
        let past = [b"SV1L\x01a".as_slice(), &[0xff; 10], &[0x01]].concat();
        assert!(Chunk::decode(&past).unwrap_err().starts_with("a number past 64 bits"));
    }

    proptest! {
        #[test]
        fn any_rows_read_back(
            logs in proptest::collection::vec(
                (".{0,12}", 0usize..1000, proptest::option::of(".{0,80}"), any::<u64>(), any::<bool>(), proptest::collection::vec(any::<u64>(), 0..60)),
                0..8,
            ),
            verdicts in proptest::collection::vec((".{0,12}", 0usize..1000, ".{0,8}", any::<bool>(), ".{0,12}"), 0..8),
        ) {
            let chunk = Chunk {
                logs: logs.into_iter().map(|(case, k, head, events, complete, offsets)| LogRow { case, k, head, events, complete, steps: LogRow::steps(&offsets) }).collect(),
                verdicts: verdicts.into_iter().map(|(case, k, dataset, passed, status)| VerdictRow { case, k, dataset, passed, status }).collect(),
            };
            prop_assert_eq!(Chunk::decode(&chunk.encode()), Ok(chunk.clone()));
            for log in &chunk.logs {
                prop_assert_eq!(LogRow::steps(&log.offsets()), log.steps.clone());
            }
        }
    }
}
