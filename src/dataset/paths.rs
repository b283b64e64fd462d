//! Where the paths a dataset names point: relative to the dataset's own project, never
//! to the working directory or to whichever pipeline loads it.
//!
//! A dataset's project is the directory that holds its `datasets/` directory
//! (`proj/datasets/agents/suite.jsonl` → `proj/`); a dataset anywhere else names paths
//! relative to its own directory (`examples/record/cases.jsonl` → `examples/record/`).
//! It is the pipeline's rule (`pipeline::default_base`) applied to the dataset, so in
//! the usual layout — `pipeline/`, `datasets/`, `fixtures/` side by side — a dataset
//! and its pipelines agree, and a dataset shared by pipelines elsewhere still means the
//! same recordings, rubrics and grader scripts.
//!
//! The runner reads rubrics and runs graders from the pipeline's base, so the loader
//! rewrites what a dataset names into a path relative to that base ([`rebase`]); where
//! the two directories are the same (every pipeline in this repository) nothing is
//! rewritten and logs are exactly what they were.

use std::path::{Component, Path, PathBuf};

use serde_json::Value;

use crate::pipeline::Pipeline;

/// The directory a dataset's paths are relative to (see the module doc).
pub fn dataset_base(dataset: &Path) -> PathBuf {
    let dir = dataset.parent().unwrap_or(Path::new(""));
    let lexical = normal(dir);
    let parts: Vec<Component> = lexical.components().collect();
    if let Some(i) = parts.iter().rposition(|c| c.as_os_str() == "datasets") {
        return parts[..i].iter().collect::<PathBuf>();
    }
    // `../suite.jsonl` from inside the dataset directory: its name is the file system's
    if let Ok(real) = dir.canonicalize()
        && let Some(i) = real.components().collect::<Vec<_>>().iter().rposition(|c| c.as_os_str() == "datasets")
    {
        let up = real.components().count() - i;
        return (0..up).fold(lexical, |p, _| p.join(".."));
    }
    lexical
}

/// `rel`, named in a dataset whose paths are relative to `root`, as the path the
/// pipeline resolves (relative to its base). Unchanged when `root` is the base.
pub fn rebase(pipeline: &Pipeline, root: &Path, rel: &str) -> String {
    let base = normal(&pipeline.base);
    let root = normal(root);
    if root == base || Path::new(rel).is_absolute() {
        return rel.to_string();
    }
    let target = normal(&root.join(rel));
    match relative_to(&target, &base) {
        Some(path) => path.to_string_lossy().replace('\\', "/"),
        None => target.canonicalize().unwrap_or(target).to_string_lossy().into_owned(),
    }
}

/// Where `rel`, named in `dataset`, is on disk (for the loader and `stateval record`).
pub fn resolve(pipeline: &Pipeline, dataset: &Path, rel: &str) -> PathBuf {
    pipeline.resolve(&rebase(pipeline, &dataset_base(dataset), rel))
}

/// A custom or judge matcher as written, with the files it names rebased (see
/// [`rebase`]): a judge's `rubric`; a grader's program when it is a path, and those of
/// its arguments that name a file next to the dataset. Other matchers are returned
/// as they are; so is everything when the dataset's root is the pipeline's base.
pub fn rebase_matcher(pipeline: &Pipeline, root: &Path, spec: &Value) -> Value {
    if normal(root) == normal(&pipeline.base) {
        return spec.clone();
    }
    let Some((name, arg)) = spec.as_object().filter(|o| o.len() == 1).and_then(|o| o.iter().next()) else {
        return spec.clone();
    };
    let mut arg = arg.clone();
    match name.as_str() {
        "judge" => {
            if let Some(rubric) = arg.get("rubric").and_then(Value::as_str) {
                arg["rubric"] = Value::String(rebase(pipeline, root, rubric));
            }
        }
        "custom" => {
            if let Some(command) = arg.get_mut("command").and_then(Value::as_array_mut) {
                for (i, item) in command.iter_mut().enumerate() {
                    let Some(text) = item.as_str() else { continue };
                    let names_a_path = if i == 0 { text.contains('/') } else { root.join(text).is_file() };
                    if names_a_path {
                        *item = Value::String(rebase(pipeline, root, text));
                    }
                }
            }
        }
        "not" => arg = rebase_matcher(pipeline, root, &arg),
        "any_of" | "all_of" => {
            if let Some(items) = arg.as_array_mut() {
                for item in items {
                    *item = rebase_matcher(pipeline, root, item);
                }
            }
        }
        _ => return spec.clone(),
    }
    serde_json::json!({ name: arg })
}

/// A dataset's name (`datasets/examples/treasury.jsonl` → `examples/treasury`): its
/// path under the pipeline's base, without `datasets/` and the extension. Reports
/// group cases by it, and a case's goldens live in `<goldens>/<name>/`, so a name never
/// leads out of that directory: a dataset outside the base (an absolute pattern, one
/// reached with `..`) is named by what follows its last `datasets/` directory, else by
/// its file name (`/elsewhere/datasets/a/b.jsonl` → `a/b`, `../suites/cases.jsonl` →
/// `cases`). Case ids are unique across a pipeline, so goldens of two datasets that
/// share a name never collide.
pub fn dataset_name(base: &Path, path: &Path) -> String {
    let (base, path) = (normal(base), normal(path));
    let under_base = path.strip_prefix(&base).ok().filter(|rel| rel.components().all(|c| is_name(&c)));
    let rel = match under_base {
        Some(rel) => rel.strip_prefix("datasets").unwrap_or(rel).to_path_buf(),
        None => {
            let names: Vec<Component> = path.components().filter(is_name).collect();
            let last = names.len().saturating_sub(1);
            let from = names.iter().rposition(|n| n.as_os_str() == "datasets").map_or(last, |i| (i + 1).min(last));
            names[from..].iter().collect()
        }
    };
    let names = rel.with_extension("");
    names.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect::<Vec<_>>().join("/")
}

fn is_name(c: &Component) -> bool {
    matches!(c, Component::Normal(_))
}

/// `a/./b/../c` → `a/c`, without touching the file system; leading `..` stay.
fn normal(path: &Path) -> PathBuf {
    let mut out: Vec<Component> = Vec::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir if matches!(out.last(), Some(Component::Normal(_))) => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out.iter().collect()
}

/// `target` relative to `base` (both normalised), when it can be said lexically.
fn relative_to(target: &Path, base: &Path) -> Option<PathBuf> {
    let t: Vec<Component> = target.components().collect();
    let b: Vec<Component> = base.components().collect();
    let common = t.iter().zip(&b).take_while(|(x, y)| x == y).count();
    if b[common..].iter().any(|c| !matches!(c, Component::Normal(_))) {
        return None;
    }
    let mut out = PathBuf::new();
    for _ in common..b.len() {
        out.push("..");
    }
    for c in &t[common..] {
        out.push(c.as_os_str());
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pipeline_at(base: &str) -> Pipeline {
        let mut p = Pipeline::parse(Path::new("p.toml"), "[pipeline]\nname = \"p\"\ndatasets = [\"x\"]\n").unwrap();
        p.base = PathBuf::from(base);
        p
    }

    #[test]
    fn a_dataset_under_datasets_names_paths_from_the_project_and_any_other_from_its_own_directory() {
        assert_eq!(dataset_base(Path::new("./datasets/agents/suite.jsonl")), PathBuf::from(""));
        assert_eq!(dataset_base(Path::new("../datasets/suite.jsonl")), PathBuf::from(".."));
        assert_eq!(dataset_base(Path::new("/p/datasets/a/b.jsonl")), PathBuf::from("/p"));
        assert_eq!(dataset_base(Path::new("examples/record/cases.jsonl")), PathBuf::from("examples/record"));
    }

    #[test]
    fn a_dataset_is_named_from_the_base_and_a_name_never_leads_out_of_the_goldens_directory() {
        assert_eq!(dataset_name(Path::new("."), Path::new("./datasets/examples/treasury.jsonl")), "examples/treasury");
        assert_eq!(dataset_name(Path::new("/p"), Path::new("/p/datasets/security/suite.jsonl")), "security/suite");
        assert_eq!(dataset_name(Path::new("ci"), Path::new("ci/suites/cases.jsonl")), "suites/cases");
        // outside the base: what follows the last datasets/, else the file's name
        assert_eq!(dataset_name(Path::new("/p"), Path::new("/elsewhere/datasets/a/b.jsonl")), "a/b");
        assert_eq!(dataset_name(Path::new("/p"), Path::new("/tmp/x/suite.jsonl")), "suite");
        assert_eq!(dataset_name(Path::new("ci"), Path::new("ci/../suites/cases.jsonl")), "cases");
        assert_eq!(dataset_name(Path::new("."), Path::new("datasets/../../x/datasets/../y.jsonl")), "y");
    }

    #[test]
    fn a_path_is_rebased_onto_the_pipelines_base_only_when_the_roots_differ() {
        // the usual layout: nothing is rewritten
        assert_eq!(rebase(&pipeline_at("."), Path::new(""), "fixtures/r.jsonl"), "fixtures/r.jsonl");
        assert_eq!(rebase(&pipeline_at(".."), Path::new(".."), "fixtures/r.jsonl"), "fixtures/r.jsonl");
        // a pipeline in `ci/` loading `suites/cases.jsonl`: ../suites/…
        assert_eq!(rebase(&pipeline_at("ci"), Path::new("suites"), "rec/a.jsonl"), "../suites/rec/a.jsonl");
        assert_eq!(rebase(&pipeline_at("."), Path::new("suites/x"), "../rec/a.jsonl"), "suites/rec/a.jsonl");
    }

    #[test]
    fn a_matchers_rubric_and_grader_script_are_rebased_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("suites");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("tone.py"), "").unwrap();
        let p = pipeline_at(&dir.path().join("ci").to_string_lossy());
        let spec = serde_json::json!({"all_of": [
            {"judge": {"rubric": "r.md", "profile": "t", "pass": {"exact": 5}}},
            {"custom": {"command": ["python3", "tone.py", "--strict"]}},
            {"contains": "tone.py"}]});
        let rebased = rebase_matcher(&p, &root, &spec);
        assert_eq!(rebased["all_of"][0]["judge"]["rubric"], "../suites/r.md");
        assert_eq!(
            rebased["all_of"][1]["custom"]["command"],
            serde_json::json!(["python3", "../suites/tone.py", "--strict"])
        );
        assert_eq!(rebased["all_of"][2], spec["all_of"][2]);
        assert_eq!(rebase_matcher(&p, &dir.path().join("ci"), &spec), spec);
    }
}
