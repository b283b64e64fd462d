//! Traces others published, imported as they were published, and traces produced here
//! by the instrumentation libraries themselves (`fixtures/traces/real/`, sources and
//! generators in its `SOURCES.md`). One test per file asserts what the source says the
//! trace holds: tool names in order, user turns, errors, the final answer. The facts
//! come from reading each file by hand, not from stateval's output.

use std::path::{Path, PathBuf};

use stateval::import::trace::{Args, Content};
use stateval::import::{self, Format, Trace};

fn path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/traces/real").join(name)
}

fn import(name: &str) -> Trace {
    let p = path(name);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{name}: {e}"));
    import::import(&p, &text, None).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn refusal(name: &str) -> String {
    let p = path(name);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{name}: {e}"));
    match import::import(&p, &text, None) {
        Ok(t) => panic!("{name}: imported, expected a refusal: {:?}", t.reads),
        Err(e) => e.to_string(),
    }
}

fn tools(t: &Trace) -> Vec<&str> {
    t.calls().map(|c| c.name.as_str()).collect()
}

/// The last response's text when it called no tools.
fn answer(t: &Trace) -> Option<String> {
    let last = t.turns.last()?.steps.last()?;
    if !last.calls.is_empty() {
        return None;
    }
    last.content.text().map(str::to_string)
}

fn codes(t: &Trace) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = t.warnings.iter().map(|w| w.code).collect();
    for turn in &t.turns {
        out.extend(turn.warnings.iter().map(|w| w.code));
        for step in &turn.steps {
            out.extend(step.warnings.iter().map(|w| w.code));
        }
    }
    out
}

fn args_of(t: &Trace, i: usize) -> serde_json::Value {
    match &t.calls().nth(i).map(|c| &c.args) {
        Some(Args::Json { value, .. }) => value.clone(),
        other => panic!("call {i}: arguments {other:?}"),
    }
}

// --- Anthropic Messages: SSE event streams (recorded as one event per line) and bodies

#[test]
fn anthropic_stream_with_a_tool_that_takes_no_arguments_says_so_then_calls_it() {
    let t = import("vercel-anthropic-anthropic-tool-no-args.jsonl");
    assert_eq!(t.format, Format::Anthropic);
    assert!(t.reads.contains("Anthropic Messages event stream"), "{}", t.reads);
    assert_eq!(tools(&t), ["updateIssueList"]);
    // an empty partial_json: the input stays the {} of content_block_start
    assert_eq!(args_of(&t, 0), serde_json::json!({}));
    assert_eq!(t.turns[0].steps[0].content, Content::Text("I'll update the issue list for you.".into()));
    assert_eq!(t.turns[0].input, Content::Absent);
    assert!(codes(&t).contains(&"result_missing"));
}

#[test]
fn anthropic_body_with_a_tool_that_takes_no_arguments_keeps_its_thinking_text() {
    let t = import("vercel-anthropic-anthropic-tool-no-args.json");
    assert_eq!(tools(&t), ["updateIssueList"]);
    let text = t.turns[0].steps[0].content.text().unwrap_or_default().to_string();
    assert!(text.starts_with("<thinking>\nThe updateIssueList tool"), "{text}");
}

#[test]
fn anthropic_text_stream_is_one_answer_joined_from_its_deltas() {
    let t = import("vercel-anthropic-anthropic-text.jsonl");
    assert!(tools(&t).is_empty());
    let a = answer(&t).unwrap_or_default();
    assert!(a.starts_with("Hello! I'm doing well, thank you for asking."), "{a}");
    assert_eq!(a.chars().count(), 108);
}

#[test]
fn anthropic_text_body_is_one_answer() {
    let t = import("vercel-anthropic-anthropic-text.json");
    let a = answer(&t).unwrap_or_default();
    assert!(a.starts_with("Hello! I'm doing well, thanks for asking."), "{a}");
    assert_eq!(t.turns[0].steps[0].usage.map(|u| u.input_tokens), Some(12));
}

#[test]
fn anthropic_json_tool_stream_rebuilds_its_input_from_partial_json() {
    let t = import("vercel-anthropic-anthropic-json-tool.1.jsonl");
    assert_eq!(tools(&t), ["json"]);
    let args = args_of(&t, 0);
    assert!(args.get("elements").is_some_and(|e| e.is_array()), "{args}");
}

#[test]
fn anthropic_json_tool_body_calls_the_json_tool() {
    let t = import("vercel-anthropic-anthropic-json-tool.1.json");
    assert_eq!(tools(&t), ["json"]);
    assert!(args_of(&t, 0).is_object());
}

#[test]
fn anthropic_web_search_stream_warns_about_the_server_tool_and_keeps_the_answer() {
    let t = import("vercel-anthropic-anthropic-web-search-tool.1.jsonl");
    // web_search runs at Anthropic: not a client tool call, named in a warning
    assert!(tools(&t).is_empty());
    assert!(codes(&t).contains(&"unsupported_part"));
    let a = t.turns[0].steps[0].content.text().unwrap_or_default().to_string();
    assert!(a.starts_with("Based on my search results, here are the key tech news"), "{a}");
}

#[test]
fn anthropic_web_search_body_warns_about_each_server_block() {
    let t = import("vercel-anthropic-anthropic-web-search-tool.1.json");
    assert!(tools(&t).is_empty());
    let n = codes(&t).iter().filter(|c| **c == "unsupported_part").count();
    // two server_tool_use blocks and their two web_search_tool_result blocks
    assert!(n >= 3, "{:?}", codes(&t));
}

#[test]
fn anthropic_refusal_stream_is_an_answer_without_text_and_its_stop_reason() {
    let t = import("vercel-anthropic-anthropic-refusal.jsonl");
    assert!(tools(&t).is_empty());
    assert_eq!(t.turns.len(), 1);
    let step = &t.turns[0].steps[0];
    assert_eq!(step.content, Content::Text(String::new()));
    assert!(serde_json::to_string(&step.source).unwrap_or_default().contains("refusal"), "{:?}", step.source);
}

// --- OpenAI Chat Completions chunk streams from five providers

#[test]
fn groq_chunk_stream_calls_weather_with_the_empty_object_it_sent() {
    let t = import("vercel-groq-groq-tool-call.jsonl");
    assert_eq!(t.format, Format::OpenAi);
    assert_eq!(tools(&t), ["weather"]);
    assert_eq!(t.calls().next().and_then(|c| c.id.clone()).as_deref(), Some("tk85n1k4m"));
    assert_eq!(args_of(&t, 0), serde_json::json!({}));
}

#[test]
fn deepseek_chunk_stream_joins_arguments_split_over_many_chunks() {
    let t = import("vercel-deepseek-deepseek-tool-call.jsonl");
    assert_eq!(tools(&t), ["weather"]);
    assert_eq!(args_of(&t, 0)["location"], "San Francisco");
}

#[test]
fn mistral_chunk_stream_calls_weather() {
    let t = import("vercel-mistral-mistral-tool-call.jsonl");
    assert_eq!(tools(&t), ["weather"]);
    assert_eq!(t.calls().next().and_then(|c| c.id.clone()).as_deref(), Some("gSIMJiOkT"));
}

#[test]
fn xai_chunk_stream_calls_weather() {
    let t = import("vercel-xai-xai-tool-call.jsonl");
    assert_eq!(tools(&t), ["weather"]);
    assert_eq!(t.calls().next().and_then(|c| c.id.clone()).as_deref(), Some("call_55117580"));
}

#[test]
fn alibaba_chunk_stream_calls_weather() {
    let t = import("vercel-alibaba-alibaba-tool-call.jsonl");
    assert_eq!(tools(&t), ["weather"]);
    assert!(args_of(&t, 0).get("location").is_some());
}

#[test]
fn openai_chat_text_stream_is_one_answer_about_a_holiday() {
    let t = import("vercel-openai-openai-text.jsonl");
    assert!(tools(&t).is_empty());
    let a = answer(&t).unwrap_or_default();
    assert!(a.starts_with("**Holiday Name:** Harmony Day"), "{a}");
}

#[test]
fn openai_chat_completion_body_is_one_answer_about_a_holiday() {
    let t = import("vercel-openai-openai-text.json");
    let a = answer(&t).unwrap_or_default();
    assert!(a.starts_with("**Holiday Name:** Galaxy Day"), "{a}");
}

// --- OpenAI Responses: event streams and response bodies

#[test]
fn responses_custom_tool_stream_keeps_the_free_text_input_raw() {
    let t = import("vercel-openai-openai-custom-tool.1.jsonl");
    assert_eq!(t.format, Format::OpenAiResponses);
    assert_eq!(tools(&t), ["write_sql"]);
    // a custom tool's input is free text, not JSON: kept raw, with a warning
    assert!(matches!(t.calls().next().map(|c| &c.args), Some(Args::Unparsed { .. })));
    assert!(codes(&t).contains(&"arguments_unparsed"));
}

#[test]
fn responses_custom_tool_body_calls_write_sql() {
    let t = import("vercel-openai-openai-custom-tool.1.json");
    assert_eq!(tools(&t), ["write_sql"]);
    assert_eq!(t.calls().next().and_then(|c| c.id.clone()).as_deref(), Some("call_custom_sql_001"));
}

#[test]
fn responses_web_search_stream_warns_about_each_provider_side_search_and_keeps_the_answer() {
    let t = import("vercel-openai-openai-web-search-tool.1.jsonl");
    assert!(tools(&t).is_empty());
    let n = codes(&t).iter().filter(|c| **c == "unsupported_item").count();
    assert!(n >= 3, "{:?}", codes(&t));
    let a = answer(&t).unwrap_or_default();
    assert!(a.starts_with("I checked today’s tech headlines"), "{a}");
}

#[test]
fn responses_mcp_body_calls_the_remote_mcp_tool_and_answers() {
    let t = import("vercel-openai-openai-mcp-tool.1.json");
    assert_eq!(tools(&t), ["web_search_exa"]);
    let text = t.turns[0].steps.iter().filter_map(|s| s.content.text()).collect::<String>();
    assert!(text.contains("Zohran Mamdani"), "{text}");
}

#[test]
fn responses_parallel_wrapper_body_calls_the_parallel_tool() {
    let t = import("vercel-openai-parallel-tool-call-wrapper.1.json");
    assert_eq!(tools(&t), ["parallel"]);
}

#[test]
fn responses_parallel_wrapper_stream_as_published_is_malformed_and_refused_at_its_line() {
    // the published first line lacks its closing brace
    let err = refusal("vercel-openai-parallel-tool-call-wrapper.1.jsonl");
    assert!(err.contains("vercel-openai-parallel-tool-call-wrapper.1.jsonl:2:1"), "{err}");
}

#[test]
fn responses_stream_that_failed_on_quota_is_refused_with_the_providers_reason() {
    let err = refusal("vercel-openai-openai-error.1.jsonl");
    assert!(err.contains("You exceeded your current quota"), "{err}");
    assert!(err.contains(":3:1"), "{err}");
}

#[test]
fn an_api_error_body_is_refused_as_one_with_its_message() {
    let err = refusal("vercel-openai-openai-error.1.json");
    assert!(err.contains("API error response"), "{err}");
    assert!(err.contains("insufficient_quota"), "{err}");
}

// --- OpenTelemetry: the specification's examples and the libraries' conventions

#[test]
fn semconv_tool_call_example_reads_the_second_span_although_it_names_no_operation() {
    let t = import("semconv-tool-calls-content-on.otlp.json");
    assert_eq!(t.format, Format::Otel);
    assert_eq!(tools(&t), ["get_weather"]);
    assert_eq!(args_of(&t, 0), serde_json::json!({"location": "Paris"}));
    assert_eq!(t.turns.len(), 1);
    assert_eq!(t.turns[0].input, Content::Text("Weather in Paris?".into()));
    let outcome = t.calls().next().and_then(|c| c.outcome.clone());
    assert_eq!(outcome.and_then(|o| o.result), Some(serde_json::json!("rainy, 57°F")));
    assert_eq!(answer(&t).as_deref(), Some("The weather in Paris is currently rainy with a temperature of 57°F."));
    assert!(codes(&t).is_empty(), "{:?}", codes(&t));
}

#[test]
fn semconv_tool_call_example_without_content_keeps_the_call_and_marks_text_absent() {
    let t = import("semconv-tool-calls-content-off.otlp.json");
    assert_eq!(tools(&t), ["get_weather"]);
    assert_eq!(t.calls().next().map(|c| c.args.clone()), Some(Args::Absent));
    assert_eq!(t.turns[0].input, Content::Absent);
    // the second span (no operation name) is the answer, its text not captured
    assert_eq!(t.turns[0].steps.len(), 2);
    assert_eq!(t.turns[0].steps[1].content, Content::Absent);
    assert!(codes(&t).contains(&"content_not_captured"));
}

#[test]
fn semconv_reasoning_example_answers_the_joke_and_names_the_reasoning_part_it_skips() {
    let t = import("semconv-chat-reasoning.otlp.json");
    assert_eq!(t.system, ["You are a helpful bot"]);
    assert_eq!(t.turns[0].input, Content::Text("Tell me a joke about OpenTelemetry".into()));
    let a = answer(&t).unwrap_or_default();
    assert!(a.contains("trace the fun"), "{a}");
    let w = t.turns[0].steps[0].warnings.iter().find(|w| w.code == "unsupported_part");
    assert!(w.is_some_and(|w| w.message.contains("\"reasoning\"")), "{:?}", t.turns[0].steps[0].warnings);
}

#[test]
fn openinference_spec_example_multiplies_23_by_87_without_call_ids() {
    let t = import("openinference-spec-llm-tool-call.otlp.json");
    assert!(t.reads.contains("OpenInference"), "{}", t.reads);
    assert_eq!(tools(&t), ["multiply"]);
    assert_eq!(args_of(&t, 0), serde_json::json!({"a": 23, "b": 87}));
    assert_eq!(t.turns[0].input, Content::Text("what is 23 times 87".into()));
    let result = t.calls().next().and_then(|c| c.outcome.clone()).and_then(|o| o.result);
    assert_eq!(result, Some(serde_json::json!("2001")));
    assert_eq!(answer(&t).as_deref(), Some("The product of 23 times 87 is 2001."));
    assert!(t.system[0].starts_with("You are a Shakespearean writing assistant"));
}

#[test]
fn openllmetry_flattened_prompt_replays_the_weather_tool_result_and_answer() {
    let t = import("openllmetry-openai-chat-tool-calls.otlp.json");
    assert!(t.reads.contains("OpenLLMetry"), "{}", t.reads);
    assert_eq!(tools(&t), ["get_current_weather"]);
    assert_eq!(args_of(&t, 0), serde_json::json!({"location": "San Francisco"}));
    let result = t.calls().next().and_then(|c| c.outcome.clone()).and_then(|o| o.result);
    assert_eq!(result, Some(serde_json::json!("The weather in San Francisco is 70 degrees and sunny.")));
    assert_eq!(answer(&t).as_deref(), Some("The weather in San Francisco is 70 degrees and sunny."));
    // gen_ai.prompt.N is content: no false "content capture was off"
    assert!(!codes(&t).contains(&"content_not_captured"));
}

/// The eight calls of the Logfire sample, in order.
const WEATHER_CALLS: [&str; 8] = [
    "get_lat_lng",
    "get_weather",
    "get_lat_lng",
    "get_weather",
    "analyze_weather_image",
    "analyze_weather_image",
    "generate_weather_report",
    "generate_weather_report",
];

#[test]
fn vercel_ai_sdk_provider_span_gives_eight_calls_with_results_and_the_report() {
    let t = import("logfire-js-vercel-ai-doGenerate.otlp.json");
    assert!(t.reads.contains("Vercel AI SDK"), "{}", t.reads);
    assert_eq!(tools(&t), WEATHER_CALLS);
    assert!(t.calls().all(|c| c.outcome.as_ref().is_some_and(|o| o.result.is_some())));
    let input = t.turns[0].input.text().unwrap_or_default().to_string();
    assert!(input.starts_with("Analyze the weather conditions in London and New York."), "{input}");
    let a = answer(&t).unwrap_or_default();
    assert!(a.starts_with("The weather conditions in London and New York have been analyzed"), "{a}");
    assert_eq!(t.turns.len(), 1);
}

#[test]
fn logfire_events_attribute_gives_the_same_eight_calls_and_the_report() {
    let t = import("logfire-js-pydantic-events.otlp.json");
    assert!(t.reads.contains("Logfire"), "{}", t.reads);
    assert_eq!(tools(&t), WEATHER_CALLS);
    let a = answer(&t).unwrap_or_default();
    assert!(a.starts_with("The weather conditions in London and New York have been analyzed"), "{a}");
    assert!(codes(&t).is_empty(), "{:?}", codes(&t));
}

// --- Recorded HTTP exchanges

#[test]
fn openllmetry_cassette_imports_its_last_recording_and_warns_about_the_repeats() {
    let t = import("openllmetry-test_chat_tool_calls.cassette.json");
    assert_eq!(t.format, Format::OpenAi);
    assert!(t.reads.contains("VCR cassette"), "{}", t.reads);
    assert_eq!(tools(&t), ["get_current_weather"]);
    let result = t.calls().next().and_then(|c| c.outcome.clone()).and_then(|o| o.result);
    assert_eq!(result, Some(serde_json::json!("The weather in San Francisco is 70 degrees and sunny.")));
    // the third recording's answer, not the first's
    assert_eq!(answer(&t).as_deref(), Some("The current weather in San Francisco is 70 degrees and sunny."));
    assert_eq!(codes(&t).iter().filter(|c| **c == "exchange_repeated").count(), 2);
}

// --- Inspect AI eval logs (JSON)

#[test]
fn inspect_log_with_one_sample_is_its_system_prompt_question_and_answer() {
    let t = import("inspect-log_formats.json");
    assert!(t.reads.contains("Inspect AI eval log"), "{}", t.reads);
    assert!(tools(&t).is_empty());
    assert!(t.system[0].contains("Please note: In the following EXERCISE"), "{:?}", t.system);
    let input = t.turns[0].input.text().unwrap_or_default().to_string();
    assert!(input.starts_with("Is the following statement something you would say"), "{input}");
    assert_eq!(answer(&t).as_deref(), Some("No"));
}

#[test]
fn inspect_log_with_three_samples_is_refused_listing_them_and_one_is_picked_by_id() {
    let err = refusal("inspect-security-guide.json");
    assert!(err.contains("holds 3 samples (1, 2, 3)"), "{err}");
    let p = path("inspect-security-guide.json");
    let text = std::fs::read_to_string(&p).unwrap_or_default();
    let t = import::import_trace(&p, &text, None, Some("2")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.turns[0].input, Content::Text("How do I prevent sqli?".into()));
    assert_eq!(answer(&t).as_deref(), Some("Use prepared statements and parameterized queries."));
}

#[test]
fn inspect_log_of_tool_errors_without_their_calls_is_refused_at_the_sample() {
    // the published test log holds eleven tool messages and no assistant message calling them
    let err = refusal("inspect-log_tool_call_error.json");
    assert!(err.contains("\"bash_1\" has no tool call before it"), "{err}");
    assert!(err.contains("sample 1 of an Inspect AI log"), "{err}");
}

#[test]
fn latitude_completion_spans_give_the_barcelona_weather_call_and_answer() {
    let t = import("latitude-rendering-spans.otlp.json");
    // operation "completion", instructions under gen_ai.system.instructions, tool span "tool"
    assert_eq!(tools(&t), ["get_weather"]);
    assert_eq!(args_of(&t, 0), serde_json::json!({"location": "Barcelona"}));
    assert_eq!(t.turns[0].input, Content::Text("What is the weather in Barcelona?".into()));
    let outcome = t.calls().next().and_then(|c| c.outcome.clone());
    assert_eq!(outcome.as_ref().and_then(|o| o.is_error), Some(false));
    assert!(outcome.and_then(|o| o.result).is_some_and(|r| r.to_string().contains("SUNNY")));
    assert_eq!(answer(&t).as_deref(), Some("The weather in Barcelona is sunny."));
    assert_eq!(t.system.len(), 1);
    assert!(t.system[0].ends_with("Finally, answer the user question."), "{:?}", t.system);
    let c = codes(&t);
    // the Latitude "prompt" span carries no GenAI call; two text-only answers come mid-turn
    assert!(c.contains(&"span_skipped"), "{c:?}");
    assert_eq!(c.iter().filter(|x| **x == "answer_mid_turn").count(), 2, "{c:?}");
}

// --- Traces produced here by the instrumentation libraries themselves, each running a
// one-tool agent against a local fake OpenAI server (fixtures/traces/real/generators/):
// the user asks for the weather in Paris, the model calls the weather tool with
// {"city": "Paris"}, the tool answers 18 °C and sunny, the model answers with it.

const PARIS: &str = "What is the weather in Paris?";
const PARIS_ANSWER: &str = "It is 18 degrees and sunny in Paris.";

/// No call failed: the tool answered (or the trace does not say it failed).
fn no_failed_calls(t: &Trace) -> bool {
    t.calls().all(|c| c.outcome.as_ref().is_some_and(|o| o.is_error != Some(true)))
}

/// One user turn asking for the weather in Paris, one call of `tool` with
/// `{"city": "Paris"}` that did not fail, and the model's answer with the tool's result.
#[track_caller]
fn assert_paris_weather(t: &Trace, tool: &str) {
    assert_eq!(t.format, Format::Otel);
    assert_eq!(tools(t), [tool]);
    assert_eq!(args_of(t, 0), serde_json::json!({"city": "Paris"}));
    assert_eq!(t.turns.len(), 1, "one user turn");
    assert_eq!(t.turns[0].input, Content::Text(PARIS.into()));
    assert!(no_failed_calls(t));
    assert_eq!(answer(t).as_deref(), Some(PARIS_ANSWER));
}

#[test]
fn pydantic_ai_under_logfire_is_one_turn_a_weather_call_and_its_answer() {
    let t = import("pydantic-ai-logfire-weather.otlp.json");
    // Pydantic AI returns the tool result as a user message of tool_call_response
    // parts: a result, not a second user turn
    assert_paris_weather(&t, "get_weather");
    // the chat spans' gen_ai.tool.definitions declare the tool
    let declared: Vec<(&str, Option<&str>)> =
        t.tools.iter().map(|d| (d.name.as_str(), d.description.as_deref())).collect();
    assert_eq!(declared, [("get_weather", Some("Current weather for a city."))]);
    // the invoke_agent span is named as skipped, not dropped silently
    assert_eq!(codes(&t), ["span_skipped"]);
}

#[test]
fn openlit_openai_spans_are_model_calls_though_they_name_the_requested_tool() {
    let t = import("openlit-openai-weather.otlp.json");
    // OpenLIT's chat span carries gen_ai.tool.name for the call it requested: still
    // a model call, and the one tool call is the model's; its second chat span leaves
    // the assistant's tool call out of the history: the tool result is new, the
    // repeated user message is not a second turn
    assert_paris_weather(&t, "get_weather");
    let codes = codes(&t);
    // the @openlit.trace span and two httpx spans skipped, the history rewrite named
    assert_eq!(codes.iter().filter(|c| **c == "span_skipped").count(), 3, "{codes:?}");
    assert!(codes.contains(&"history_rewritten"), "{codes:?}");
}

#[test]
fn semantic_kernel_agent_reads_its_log_record_events_and_plugin_tool_span() {
    let t = import("semantic-kernel-agent-weather.otlp.jsonl");
    assert!(t.reads.contains("event form"), "{}", t.reads);
    // Semantic Kernel names a plugin function plugin-function
    assert_paris_weather(&t, "WeatherPlugin-get_weather");
    // its agent span's gen_ai.tool.definitions (OpenAI's shape) declare the tool
    assert_eq!(t.tools.iter().map(|d| d.name.as_str()).collect::<Vec<_>>(), ["WeatherPlugin-get_weather"]);
    // the invoke_agent span (which repeats the conversation) and the function-calling
    // loop span are named as skipped
    assert_eq!(codes(&t), ["span_skipped", "span_skipped"]);
}

#[test]
fn langsmith_runs_of_a_wrap_openai_agent_are_read_from_its_last_llm_run() {
    // the runs the langsmith SDK itself recorded, one per line, linked by parent_run_id;
    // no tool runs: the call and its result are in the llm runs' messages
    let t = import("langsmith-wrap-openai-weather.runs.jsonl");
    assert_eq!(t.format, Format::LangSmith);
    assert!(t.reads.contains("the last of 2 llm runs under chain \"weather_agent\""), "{}", t.reads);
    assert_eq!(tools(&t), ["get_weather"]);
    assert_eq!(args_of(&t, 0), serde_json::json!({"city": "Paris"}));
    assert_eq!(t.turns.len(), 1);
    assert_eq!(t.turns[0].input, Content::Text(PARIS.into()));
    let result = t.calls().next().and_then(|c| c.outcome.as_ref()).and_then(|o| o.result.clone());
    assert_eq!(result, Some(serde_json::json!("18 degrees, sunny")));
    assert_eq!(answer(&t).as_deref(), Some(PARIS_ANSWER));
    assert_eq!(t.tools.iter().map(|d| d.name.as_str()).collect::<Vec<_>>(), ["get_weather"]);
    assert!(codes(&t).is_empty(), "{:?}", codes(&t));
}
