//! A plan keeps references to its cases, not the cases: each is read again from its
//! dataset (and its recordings from their files) when it runs, but for the first cases
//! and recording files, which are handed to their first run as validating read them.
//! What was validated must be what runs, so an edit in between is never a different case
//! run quietly: a case kept runs as it was validated, and one read again is an error
//! naming the file.

use stateval::runner::{Plan, RunnerError, Selection};
use stateval::synth::{SynthSpec, write_suite};

fn suite() -> (tempfile::TempDir, Plan) {
    let dir = tempfile::tempdir().expect("temp dir");
    let pipeline = write_suite(dir.path(), &SynthSpec { cases: 3, turns: 4, runs: 2, seed: 3 }).expect("suite");
    let plan = Plan::load(&pipeline, &Selection::default()).expect("the synthetic suite loads");
    (dir, plan)
}

#[test]
fn a_case_read_again_is_the_case_that_was_validated() -> Result<(), RunnerError> {
    let (dir, plan) = suite();
    assert_eq!(plan.cases.len(), 3);
    let text = std::fs::read_to_string(dir.path().join("datasets/synth/suite.jsonl"))?;
    for (i, line) in text.lines().enumerate() {
        let case = plan.case(i)?;
        let written: serde_json::Value = serde_json::from_str(line).expect("JSON line");
        assert_eq!(case.id, written["id"]);
        assert_eq!(serde_json::json!(case.turns), written["turns"]);
        assert_eq!(case.line, i + 1);
        assert_eq!(case.expect.len(), 4);
        assert_eq!(plan.cases[i].line, i + 1);
        let keys: Vec<_> = case.recordings.iter().map(|r| r.key()).collect();
        assert_eq!(keys, plan.cases[i].recordings.to_vec());
        for recording in &case.recordings {
            assert_eq!(recording.load().map(|r| r.responses.len()), Ok(8));
        }
    }
    Ok(())
}

#[test]
fn a_selection_keeps_references_to_the_selected_cases_only() -> Result<(), RunnerError> {
    let (dir, _) = suite();
    let filter = glob::Pattern::new("synth-0000[02]").ok();
    let plan = Plan::load(&dir.path().join("pipeline/synth.toml"), &Selection { filter, tags: Vec::new() })?;
    let lines: Vec<usize> = plan.cases.iter().map(|c| c.line).collect();
    assert_eq!(lines, [1, 3]);
    assert_eq!(plan.case(1)?.id, "synth-00002");
    Ok(())
}

#[test]
fn a_dataset_line_edited_after_validation_is_an_error_naming_it() {
    let (dir, plan) = suite();
    let path = dir.path().join("datasets/synth/suite.jsonl");
    let text = std::fs::read_to_string(&path).expect("dataset");
    // same length, different bytes: only the content check can notice
    std::fs::write(&path, text.replacen("Turn 0:", "Turn 9:", 2)).expect("edit");
    // the first run of each case takes it as validating parsed it: the edit is not run
    for i in 0..2 {
        let kept = plan.case(i).expect("a kept case");
        assert!(kept.turns[0].starts_with("Turn 0:"), "{:?}", kept.turns[0]);
    }
    // read again, the edit is noticed
    assert!(plan.case(0).is_err());
    let err = plan.case(1).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err.contains("suite.jsonl:2:1"), "{err}");
    assert!(err.contains("the dataset changed after it was validated"), "{err}");
    // the third line is as validated and still reads, kept or read again
    assert!(plan.case(2).is_ok());
    assert!(plan.case(2).is_ok());
}

#[test]
fn a_case_kept_from_validation_is_the_case_read_again() -> Result<(), RunnerError> {
    let (_dir, plan) = suite();
    for i in 0..plan.cases.len() {
        let kept = plan.case(i)?;
        let read = plan.case(i)?;
        assert_eq!(format!("{kept:?}"), format!("{read:?}"), "case {i}");
    }
    Ok(())
}

#[test]
fn a_recording_edited_after_validation_is_refused_when_it_is_replayed() -> Result<(), RunnerError> {
    let (dir, plan) = suite();
    let path = dir.path().join("fixtures/recordings/synth-00001-1.jsonl");
    let text = std::fs::read_to_string(&path)?;
    std::fs::write(&path, text.replacen("is in order", "is in ordex", 1))?;
    let case = plan.case(1)?;
    assert!(case.recordings[0].load().is_ok(), "run 0's file is untouched");
    let err = case.recordings[1].load().err().unwrap_or_default();
    assert!(err.ends_with("synth-00001-1.jsonl: recording changed on disk after the run was validated"), "{err}");
    Ok(())
}

#[test]
fn cases_are_found_again_past_blank_lines_and_crlf_line_ends() -> Result<(), RunnerError> {
    let (dir, _) = suite();
    let path = dir.path().join("datasets/synth/suite.jsonl");
    let text = std::fs::read_to_string(&path)?;
    let crlf: String = text.lines().map(|l| format!("\r\n{l}\r\n")).collect();
    std::fs::write(&path, crlf)?;
    let plan = Plan::load(&dir.path().join("pipeline/synth.toml"), &Selection::default())?;
    let lines: Vec<usize> = plan.cases.iter().map(|c| c.line).collect();
    assert_eq!(lines, [2, 4, 6]);
    for (i, id) in ["synth-00000", "synth-00001", "synth-00002"].iter().enumerate() {
        assert_eq!(plan.case(i)?.id, *id);
    }
    Ok(())
}

#[test]
fn a_tool_manifest_is_read_when_a_case_needs_it_and_must_be_the_one_validated() -> Result<(), RunnerError> {
    let (dir, plan) = suite();
    // the plan keeps the manifest's digest, not the manifest
    let planned = &plan.agents["synth"];
    let manifest = plan.manifest("synth").map_err(|e| RunnerError::Input(vec![e]))?;
    assert_eq!(manifest.digest, planned.manifest);
    assert_eq!(manifest.tools.len(), 1);
    // once read, later cases share it; an edit is noticed when it is read again
    let path = dir.path().join("fixtures/tools/synth.json");
    let text = std::fs::read_to_string(&path)?;
    std::fs::write(&path, text.replace("Look up a record", "Look up a recorx"))?;
    let fresh = Plan::load(&dir.path().join("pipeline/synth.toml"), &Selection::default())?;
    assert_ne!(fresh.agents["synth"].manifest, planned.manifest, "the edit is a new plan");
    std::fs::write(&path, &text)?;
    let err = fresh.manifest("synth").err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err.contains("synth.json"), "{err}");
    assert!(err.contains("the tool manifest changed while the run went on"), "{err}");
    Ok(())
}

#[test]
fn a_run_whose_manifest_is_edited_after_validation_stops_with_an_input_error() -> Result<(), RunnerError> {
    let (dir, plan) = suite();
    let path = dir.path().join("fixtures/tools/synth.json");
    let text = std::fs::read_to_string(&path)?;
    std::fs::write(&path, text.replace("Look up a record", "Look up a recorx"))?;
    let case = plan.case(0)?;
    let recording = case.recordings[0].load().map_err(RunnerError::Internal)?;
    let err = plan.replay(&case, 0, &recording, Box::new(Vec::<u8>::new()), None, &[]).err();
    match err {
        Some(stateval::runner::ReplayError::Input(e)) => {
            assert!(e.to_string().contains("the tool manifest changed while the run went on"), "{e}");
        }
        other => panic!("expected an input error, got {:?}", other.map(|e| e.to_string())),
    }
    Ok(())
}

/// A merge loads its plan knowing the recordings its shards validated (the digest of each
/// file's bytes, with its content digest): a file with those bytes is taken on them
/// without being parsed, and any other file is validated in full.
#[test]
fn a_recording_known_by_its_bytes_is_not_parsed_again_and_any_other_is() -> Result<(), RunnerError> {
    use stateval::dataset::ValidatedRecordings;
    use stateval::dataset::recording::Recording;
    use stateval::pipeline::Pipeline;
    use std::sync::Arc;

    let (dir, plan) = suite();
    let pipeline_path = dir.path().join("pipeline/synth.toml");
    let load = |known: Option<ValidatedRecordings>| {
        let pipeline = Pipeline::load(&pipeline_path).map_err(|e| RunnerError::Input(vec![e]))?;
        Plan::from_pipeline_with(pipeline, Vec::new(), &Selection::default(), known.map(Arc::new))
    };
    let known: ValidatedRecordings =
        plan.cases.iter().flat_map(|c| c.recordings.iter()).filter_map(|key| Some((key.file?, key.digest))).collect();
    assert_eq!(known.len(), 6, "every recording of the suite is a file");
    assert_eq!(load(Some(known.clone()))?.digest, plan.digest);

    // a file that no longer parses, but whose bytes are known, is taken on its digests
    let path = dir.path().join("fixtures/recordings/synth-00001-1.jsonl");
    let broken = b"{\"response\": not json\n".to_vec();
    std::fs::write(&path, &broken)?;
    let mut vouched = known.clone();
    let content = plan.cases[0].recordings[0].digest;
    vouched.insert(Recording::bytes_digest(&broken), content);
    let taken = load(Some(vouched))?;
    assert_eq!(taken.cases[1].recordings[1].digest, content);
    assert_eq!(taken.cases[1].recordings[1].file, Some(Recording::bytes_digest(&broken)));

    // bytes nobody vouched for are validated: the error names the file and line
    let err = load(Some(known)).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err.contains("synth-00001-1.jsonl:1:"), "{err}");
    Ok(())
}

/// A run replays the recording its plan validated: the bytes validating read (kept for
/// the run), never an edit made since; a file read again (its kept bytes already taken)
/// is refused when it was edited since the plan validated it. The untouched file reads
/// as the recording validated.
#[test]
fn a_recording_file_edited_after_validation_is_refused_when_its_run_reads_it() -> Result<(), RunnerError> {
    use stateval::dataset::recording::Recording;
    let (dir, plan) = suite();
    let path = dir.path().join("fixtures/recordings/synth-00001-1.jsonl");
    let text = std::fs::read_to_string(&path)?;
    std::fs::write(&path, text.replacen("is in order", "is in ordex", 1))?;
    let case = plan.case(1)?;
    let untouched = plan.recording(&case.recordings[0]).expect("run 0's file is untouched");
    assert_eq!(untouched.into_recording(), Ok((*case.recordings[0].load().expect("the file reads")).clone()));
    let validated = Recording::validate(text.into_bytes(), &plan.pipeline.display(&path)).expect("valid");
    let replayed = plan.recording(&case.recordings[1]).and_then(|r| r.into_recording());
    assert_eq!(replayed, Ok(validated), "the validated bytes, not the edit");
    let err = plan.recording(&case.recordings[1]).err().unwrap_or_default();
    assert!(err.ends_with("synth-00001-1.jsonl: recording changed on disk after the run was validated"), "{err}");
    Ok(())
}

/// The dataset is opened once per run, not once per case: a file moved away after its
/// first case was read still gives the later cases (the one open file does), where a
/// case that opened its dataset again would find nothing. A line edited in the file
/// that is open is still refused (see the test above).
#[test]
fn cases_are_read_again_from_one_open_dataset_not_one_open_per_case() -> Result<(), RunnerError> {
    let (dir, plan) = suite();
    assert_eq!(plan.case(0)?.id, "synth-00000");
    let path = dir.path().join("datasets/synth/suite.jsonl");
    std::fs::rename(&path, dir.path().join("moved.jsonl"))?;
    assert_eq!(plan.case(2)?.id, "synth-00002");
    assert_eq!(plan.case(1)?.id, "synth-00001");
    Ok(())
}

/// A recording file is read once per run: validating reads it and keeps its bytes for
/// the run, which takes them; deleted after the plan, the file is not needed. Taken,
/// the bytes are let go, and a second take reads the file again (and refuses it, gone).
#[test]
fn a_recording_is_read_once_per_run_its_validated_bytes_taken_by_its_run() -> Result<(), RunnerError> {
    use stateval::runner::Replayable;
    let (dir, plan) = suite();
    let path = dir.path().join("fixtures/recordings/synth-00001-1.jsonl");
    let text = std::fs::read_to_string(&path)?;
    std::fs::remove_file(&path)?;
    let case = plan.case(1)?;
    let replayable = plan.recording(&case.recordings[1]).map_err(RunnerError::Internal)?;
    let Replayable::Lines(_, lines) = replayable else { panic!("a recording file is served line by line") };
    let served: Vec<_> = lines.collect::<Result<_, _>>().map_err(RunnerError::Internal)?;
    assert_eq!(served.len(), text.lines().filter(|l| !l.trim().is_empty()).count());
    let again = plan.recording(&case.recordings[1]).err().unwrap_or_default();
    assert!(again.contains("synth-00001-1.jsonl: cannot read recording"), "{again}");
    Ok(())
}
