//! The event log: the source of truth for everything a run did.
//!
//! One file per (case, recorded run), one RFC 8785 canonical JSON object per line:
//! `{"data":…,"hash":…,"kind":…,"prev":…,"seq":…,"t":…,"turn":…}`. `hash` is blake3
//! (context `"stateval event v1"`) over the canonical bytes of the event without its
//! `hash` field, and `prev` is the previous line's hash, so any edit, deletion,
//! reordering or insertion breaks verification at that event (see [`verify`]).
//!
//! State — memory, sandbox state — is never stored beside the log: it is a fold over
//! events ([`fold`]), used alike by extractors, `stateval show` and the runtime's tests.

pub mod data;
pub mod fold;
pub mod kind;
pub mod payload;
pub mod reader;
pub(crate) mod scan;
pub mod verify;
pub mod writer;

use crate::canon::{self, Context, Digest};
pub use data::Data;
pub use kind::Kind;

/// One verified or freshly written event.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub seq: u64,
    /// User-turn index; `None` before the first turn and after the last.
    pub turn: Option<u32>,
    /// Virtual time in ms; never wall-clock.
    pub t: u64,
    pub kind: Kind,
    /// The data's canonical bytes; read it typed with [`Event::view`](Event::view) (see [`payload`]).
    pub data: Data,
    /// The event's hash, over its fields and the previous event's hash (`prev` in the
    /// log). An event does not keep `prev`: it is the hash of the event before it in
    /// the log (none for the first), and a long run holds every event until it is
    /// graded, so the copy was 33 of each event's bytes.
    pub hash: Digest,
}

/// How every line begins: its first member is `data`, the least key.
pub(crate) const LINE_OPEN: &[u8] = b"{\"data\":";

/// The fields an event is hashed over, borrowed so the writer and the verifier share
/// one encoder and cannot disagree about the byte layout. `data` is the canonical bytes
/// of the event's data.
pub(crate) struct Unhashed<'a> {
    pub seq: u64,
    pub turn: Option<u32>,
    pub t: u64,
    pub kind: Kind,
    pub data: &'a [u8],
    pub prev: Option<&'a Digest>,
}

impl<'a> Unhashed<'a> {
    /// The fields of `event` as they were hashed, with the `prev` it was hashed over
    /// (an [`Event`] does not keep it: it is the hash of the event before). Tests forge
    /// and re-check lines with it.
    #[cfg(test)]
    pub fn of(event: &'a Event, prev: Option<&'a Digest>) -> Self {
        Unhashed { seq: event.seq, turn: event.turn, t: event.t, kind: event.kind, data: event.data.as_bytes(), prev }
    }

    /// Canonical line bytes (no trailing newline) and the event's hash.
    pub fn encode(&self) -> (Vec<u8>, Digest) {
        let mut line = Vec::with_capacity(self.data.len() + 256);
        let mut digester = canon::Digester::new(Context::Event);
        let (hash, _) = self.encode_into(&mut line, None, &mut digester);
        (line, hash)
    }

    /// Append this event's canonical line (without its newline) to `out` and return its
    /// hash with its hex (see [`Unhashed::close_line`]).
    pub fn encode_into(
        &self,
        out: &mut Vec<u8>,
        prev_hex: Option<&[u8; 64]>,
        digester: &mut canon::Digester,
    ) -> (Digest, [u8; 64]) {
        let start = out.len();
        out.extend_from_slice(LINE_OPEN);
        out.extend_from_slice(self.data);
        self.close_line(out, start, prev_hex, digester)
    }

    /// Finish this event's line in `out`, whose bytes from `start` on are already the
    /// line's opening, [`LINE_OPEN`] and the data (a writer that wrote the data in place);
    /// return its hash with its hex.
    ///
    /// JCS orders keys by UTF-16 code units: `data < hash < kind < prev < seq < t <
    /// turn`. The envelope is written by hand in that order around the data's canonical
    /// bytes: the members after `hash` are written in place behind room left for it,
    /// the line without that room is hashed where it lies, and the `hash` member is
    /// written into the room. `prev_hex`, when given, is the hex of `prev` (the writer
    /// keeps the last hash's, rather than spelling it out again). `digester` is an
    /// event digester, reset here and reused from line to line.
    pub fn close_line(
        &self,
        out: &mut Vec<u8>,
        start: usize,
        prev_hex: Option<&[u8; 64]>,
        digester: &mut canon::Digester,
    ) -> (Digest, [u8; 64]) {
        const HASH_OPEN: &[u8] = b",\"hash\":\"blake3:";
        const ROOM: usize = HASH_OPEN.len() + 64 + 1;
        debug_assert!(out[start..].starts_with(LINE_OPEN) && out[start + LINE_OPEN.len()..] == *self.data);
        let room = out.len();
        out.resize(room + ROOM, 0);
        self.write_tail(out, prev_hex);
        digester.reset();
        digester.update(&out[start..room]);
        digester.update(&out[room + ROOM..]);
        let hash = digester.finish();
        let hex = hash.hex();
        let member = &mut out[room..room + ROOM];
        member[..HASH_OPEN.len()].copy_from_slice(HASH_OPEN);
        member[HASH_OPEN.len()..ROOM - 1].copy_from_slice(&hex);
        member[ROOM - 1] = b'"';
        (hash, hex)
    }

    /// The members after `hash`; `prev_hex` is the hex of `prev` when the caller has it.
    fn write_tail(&self, out: &mut Vec<u8>, prev_hex: Option<&[u8; 64]>) {
        // by hand rather than `write!`: the formatting machinery was about 1 % of a run
        let mut number = itoa::Buffer::new();
        out.extend_from_slice(b",\"kind\":\"");
        out.extend_from_slice(self.kind.as_str().as_bytes());
        out.extend_from_slice(b"\",\"prev\":");
        match self.prev {
            Some(d) => {
                out.extend_from_slice(b"\"blake3:");
                match prev_hex {
                    Some(hex) => {
                        debug_assert_eq!(hex, &d.hex());
                        out.extend_from_slice(hex);
                    }
                    None => out.extend_from_slice(&d.hex()),
                }
                out.push(b'"');
            }
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b",\"seq\":");
        out.extend_from_slice(number.format(self.seq).as_bytes());
        out.extend_from_slice(b",\"t\":");
        out.extend_from_slice(number.format(self.t).as_bytes());
        out.extend_from_slice(b",\"turn\":");
        match self.turn {
            Some(t) => out.extend_from_slice(number.format(t).as_bytes()),
            None => out.extend_from_slice(b"null"),
        }
        out.push(b'}');
    }

    /// Check that `line` is exactly this event's canonical line, without building that
    /// line: the pieces are compared in place and hashed as they are (`scratch` is
    /// reused across lines). Returns the event's hash.
    pub fn check_line(&self, line: &[u8], scratch: &mut Vec<u8>) -> Result<Digest, CheckError> {
        scratch.clear();
        self.write_tail(scratch, None);
        let (data, tail) = (self.data, &scratch[..]);

        let mut digester = canon::Digester::new(Context::Event);
        digester.update(b"{\"data\":");
        digester.update(data);
        digester.update(tail);
        let hash = digester.finish();

        const OPEN: &[u8] = b"{\"data\":";
        const HASH_OPEN: &[u8] = b",\"hash\":\"blake3:";
        let hex = hash.hex();
        let expected_len = OPEN.len() + data.len() + HASH_OPEN.len() + 64 + 1 + tail.len();
        let hash_at = OPEN.len() + data.len() + HASH_OPEN.len();
        let canonical = line.len() == expected_len
            && line.starts_with(OPEN)
            && &line[OPEN.len()..OPEN.len() + data.len()] == data
            && &line[OPEN.len() + data.len()..hash_at] == HASH_OPEN
            && line[hash_at + 64] == b'"'
            && &line[hash_at + 65..] == tail;
        if !canonical {
            return Err(CheckError::NotCanonical);
        }
        if line[hash_at..hash_at + 64] != hex {
            return Err(CheckError::Hash);
        }
        Ok(hash)
    }
}

/// Why a line is not its event's canonical line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CheckError {
    NotCanonical,
    Hash,
}

impl Event {
    /// Field of `data`, or `Value::Null`, through the data's tree ([`Data::tree`]).
    /// Tests only: the library reads a kind's payload ([`Event::view`]) or one member
    /// ([`Data::member`]), so no reader builds a tree of an event it only looks into.
    #[cfg(test)]
    pub fn get(&self, field: &str) -> serde_json::Value {
        self.data.tree().get(field).cloned().unwrap_or_default()
    }

    /// Field of `data` as a string, borrowed from the data's text. Tests only, and only
    /// for strings written without escapes (the borrowed text is then the string).
    #[cfg(test)]
    pub fn str(&self, field: &str) -> Option<&str> {
        match self.data.member(field).as_str()? {
            std::borrow::Cow::Borrowed(s) => Some(s),
            std::borrow::Cow::Owned(s) => panic!("{field} is written with escapes ({s:?}): read it with member()"),
        }
    }
}
