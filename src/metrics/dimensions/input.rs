//! Reads the section 9 `agent-reliability` JSON into typed tasks.
//!
//! Missing fields (and `null`) read conservatively, as docs/metrics.md asks: no `success` is
//! a failure, no `actions` an empty trajectory, no number a 0. A value of the wrong
//! type or out of range is an error naming its JSON Pointer, so a dataset typo is
//! found where it is rather than averaged into a score.

use serde_json::{Map, Value};

use super::{DimensionsError, PerturbationKind, Perturbed, PerturbedTask, RunSample, Severity, Task, Variant};

/// The typed form of one input document.
pub(super) struct Parsed {
    pub(super) variant: Variant,
    pub(super) tasks: Vec<Task>,
    pub(super) perturbed: Perturbed,
}

/// The keys each object of the input may have (docs/metrics.md §9's shape).
const ROOT_KEYS: &[&str] = &["variant", "tasks", "perturbed"];
const TASK_KEYS: &[&str] = &["id", "runs"];
const PERTURBED_TASK_KEYS: &[&str] = &["id", "of", "runs"];
const RUN_KEYS: &[&str] =
    &["success", "confidence", "actions", "cost", "time", "model_calls", "errors", "latency", "violations"];
const VIOLATION_KEYS: &[&str] = &["severity"];

/// An object with a key outside `allowed` is an error naming the key.
fn known_keys(
    object: &Map<String, Value>,
    path: &Path,
    allowed: &'static [&'static str],
) -> Result<(), DimensionsError> {
    match object.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(key) => Err(DimensionsError::UnknownKey { pointer: path.render(), key: key.clone(), allowed }),
        None => Ok(()),
    }
}

/// Largest integer a double holds exactly: a count written as `3.0` is read as 3 up to here.
const MAX_EXACT_INTEGER: f64 = 9_007_199_254_740_992.0;

/// Reads one document. See the module doc for what is lenient and what is an error.
pub(super) fn read(input: &Value) -> Result<Parsed, DimensionsError> {
    let root = Path::Root;
    let object = input.as_object().ok_or_else(|| expected(&root, "a JSON object"))?;
    known_keys(object, &root, ROOT_KEYS)?;
    let variant = read_variant(object, &root)?;
    let tasks_path = root.key("tasks");
    let tasks = array(object.get("tasks"), &tasks_path, "an array of tasks")?
        .iter()
        .enumerate()
        .map(|(i, task)| read_task(task, &tasks_path.index(i), TASK_KEYS))
        .collect::<Result<Vec<_>, _>>()?;
    let perturbed = read_perturbed(object.get("perturbed"), &root.key("perturbed"))?;
    Ok(Parsed { variant, tasks, perturbed })
}

fn read_variant(object: &Map<String, Value>, root: &Path) -> Result<Variant, DimensionsError> {
    let path = root.key("variant");
    match present(object.get("variant")) {
        None => Ok(Variant::default()),
        Some(Value::String(name)) => Variant::from_name(name)
            .ok_or_else(|| DimensionsError::UnknownVariant { pointer: path.render(), found: name.clone() }),
        Some(_) => Err(expected(&path, "a string (\"camera_ready\" or \"preprint\")")),
    }
}

fn read_task(value: &Value, path: &Path, keys: &'static [&'static str]) -> Result<Task, DimensionsError> {
    let object = value.as_object().ok_or_else(|| expected(path, "a task object"))?;
    known_keys(object, path, keys)?;
    let id = optional_string(object.get("id"), &path.key("id"))?.unwrap_or_default();
    let runs_path = path.key("runs");
    let runs = array(object.get("runs"), &runs_path, "an array of runs")?
        .iter()
        .enumerate()
        .map(|(i, run)| read_run(run, &runs_path.index(i)))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Task { id: id.to_string(), runs })
}

fn read_run(value: &Value, path: &Path) -> Result<RunSample, DimensionsError> {
    let object = value.as_object().ok_or_else(|| expected(path, "a run object"))?;
    known_keys(object, path, RUN_KEYS)?;
    let field = |name: &'static str| present(object.get(name));
    let success = match field("success") {
        None => false,
        Some(v) => v.as_bool().ok_or_else(|| expected(&path.key("success"), "a boolean"))?,
    };
    let confidence = match field("confidence") {
        None => None,
        Some(v) => Some(
            v.as_f64()
                .filter(|c| (0.0..=1.0).contains(c))
                .ok_or_else(|| expected(&path.key("confidence"), "a number in 0..=1"))?,
        ),
    };
    let actions_path = path.key("actions");
    let actions = array(object.get("actions"), &actions_path, "an array of tool calls")?
        .iter()
        .enumerate()
        .map(|(i, action)| tool_name(action, &actions_path.index(i)))
        .collect::<Result<Vec<_>, _>>()?;
    let violations_path = path.key("violations");
    let violations = array(object.get("violations"), &violations_path, "an array of violations")?
        .iter()
        .enumerate()
        .map(|(i, violation)| read_severity(violation, &violations_path.index(i)))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(RunSample {
        success,
        confidence,
        actions,
        cost: non_negative(field("cost"), &path.key("cost"))?,
        time: non_negative(field("time"), &path.key("time"))?,
        model_calls: count(field("model_calls"), &path.key("model_calls"))?,
        errors: count(field("errors"), &path.key("errors"))?,
        latency: non_negative(field("latency"), &path.key("latency"))?,
        violations,
    })
}

/// An action is a tool name, or a tool call object carrying one (`{"name": …}`).
fn tool_name(value: &Value, path: &Path) -> Result<String, DimensionsError> {
    let name = match value {
        Value::String(name) => Some(name),
        Value::Object(call) => match call.get("name") {
            Some(Value::String(name)) => Some(name),
            _ => None,
        },
        _ => None,
    };
    name.cloned().ok_or_else(|| expected(path, "a tool name (a string, or an object with a string \"name\")"))
}

fn read_severity(value: &Value, path: &Path) -> Result<Severity, DimensionsError> {
    let object = value.as_object().ok_or_else(|| expected(path, "a violation object"))?;
    known_keys(object, path, VIOLATION_KEYS)?;
    Ok(match optional_string(object.get("severity"), &path.key("severity"))? {
        None => Severity::Unspecified,
        Some(label) => Severity::from_label(label),
    })
}

fn read_perturbed(value: Option<&Value>, path: &Path) -> Result<Perturbed, DimensionsError> {
    let mut perturbed = Perturbed::default();
    let Some(value) = present(value) else {
        return Ok(perturbed);
    };
    let object = value.as_object().ok_or_else(|| {
        expected(path, "an object of perturbed tasks by kind (\"fault\", \"structural\", \"prompt\")")
    })?;
    for (name, list) in object {
        let kind_path = path.key(name);
        let kind = PerturbationKind::from_name(name)
            .ok_or_else(|| DimensionsError::UnknownPerturbationKind { pointer: kind_path.render() })?;
        for (i, item) in array(Some(list), &kind_path, "an array of tasks")?.iter().enumerate() {
            let item_path = kind_path.index(i);
            let task = read_task(item, &item_path, PERTURBED_TASK_KEYS)?;
            // `of` names the task this one perturbs, as a label only: accuracies are
            // pooled over every task (docs/metrics.md §6), so ids need not match
            let of =
                optional_string(item.get("of"), &item_path.key("of"))?.map_or_else(|| task.id.clone(), str::to_string);
            perturbed.of_kind_mut(kind).push(PerturbedTask { of, runs: task.runs });
        }
    }
    Ok(perturbed)
}

/// `null` reads as absent.
fn present(value: Option<&Value>) -> Option<&Value> {
    value.and_then(present_value)
}

fn present_value(value: &Value) -> Option<&Value> {
    (!value.is_null()).then_some(value)
}

/// An optional array: absent or `null` is empty.
fn array<'v>(value: Option<&'v Value>, path: &Path, what: &'static str) -> Result<&'v [Value], DimensionsError> {
    match present(value) {
        None => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(_) => Err(expected(path, what)),
    }
}

fn optional_string<'v>(value: Option<&'v Value>, path: &Path) -> Result<Option<&'v str>, DimensionsError> {
    match present(value) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(expected(path, "a string")),
    }
}

/// A non-negative number; absent is 0.
fn non_negative(value: Option<&Value>, path: &Path) -> Result<f64, DimensionsError> {
    match value {
        None => Ok(0.0),
        Some(v) => {
            v.as_f64().filter(|x| x.is_finite() && *x >= 0.0).ok_or_else(|| expected(path, "a non-negative number"))
        }
    }
}

/// A non-negative integer (`3` or `3.0`); absent is 0.
fn count(value: Option<&Value>, path: &Path) -> Result<u64, DimensionsError> {
    let Some(v) = value else { return Ok(0) };
    if let Some(n) = v.as_u64() {
        return Ok(n);
    }
    v.as_f64()
        .filter(|x| *x >= 0.0 && x.fract() == 0.0 && *x <= MAX_EXACT_INTEGER)
        .map(|x| x as u64)
        .ok_or_else(|| expected(path, "a non-negative integer"))
}

fn expected(path: &Path, what: &'static str) -> DimensionsError {
    DimensionsError::Expected { pointer: path.render(), expected: what }
}

/// Where a value sits in the document, built on the stack while reading and rendered
/// as a JSON Pointer (RFC 6901) only when something is wrong.
enum Path<'a> {
    Root,
    Key(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl<'a> Path<'a> {
    fn key(&'a self, key: &'a str) -> Path<'a> {
        Path::Key(self, key)
    }

    fn index(&'a self, index: usize) -> Path<'a> {
        Path::Index(self, index)
    }

    fn render(&self) -> String {
        let mut segments = Vec::new();
        let mut at = self;
        loop {
            match at {
                Path::Root => break,
                Path::Key(parent, key) => {
                    segments.push(key.replace('~', "~0").replace('/', "~1"));
                    at = parent;
                }
                Path::Index(parent, index) => {
                    segments.push(index.to_string());
                    at = parent;
                }
            }
        }
        segments.iter().rev().map(|s| format!("/{s}")).collect()
    }
}
