//! Writes one long, valid event log from a real one, for measuring `verify` on large
//! logs: the template's events (all but `run_completed`) are appended again and again,
//! re-chained, until the log reaches the requested size; then `run_completed`.
//!
//! `cargo run --release --example long_log -- TEMPLATE.jsonl OUT.jsonl MEGABYTES [STATUS]`
//!
//! With `STATUS`, `run_completed` says that status instead of the template's: two logs
//! that differ in their last event only, for measuring `diff` on large logs.

use std::path::PathBuf;

use stateval::event::Kind;
use stateval::event::reader::read_log;
use stateval::event::writer::LogWriter;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: long_log TEMPLATE.jsonl OUT.jsonl MEGABYTES [STATUS]";
    let template = PathBuf::from(args.next().ok_or(usage)?);
    let out = PathBuf::from(args.next().ok_or(usage)?);
    let megabytes: u64 = args.next().ok_or(usage)?.parse()?;
    let status = args.next();
    let events = read_log(&template)?.events;
    let (body, last) = events.split_at(events.len() - 1);
    if last[0].kind != Kind::RunCompleted {
        return Err(format!("{}: the template does not end with run_completed", template.display()).into());
    }
    let mut writer = LogWriter::create(&out)?;
    let mut t = 0;
    while writer.offset() < megabytes * 1_000_000 {
        for e in body.iter().skip(usize::from(writer.events_written() > 0)) {
            t += 1;
            writer.append_data(e.turn, t, e.kind, e.data.clone());
        }
        writer.flush()?;
    }
    let mut completed = last[0].data.tree();
    if let Some(status) = status {
        completed["status"] = status.into();
    }
    writer.append(None, t + 1, Kind::RunCompleted, completed)?;
    let (_, head) = writer.finish()?;
    println!(
        "{}: {} bytes, head {}",
        out.display(),
        std::fs::metadata(&out)?.len(),
        head.map(|h| h.to_string()).unwrap_or_default()
    );
    Ok(())
}
