//! Text as the security comparisons see it: one folding and normalisation
//! ([`normalize`]), the instruction-like passages and hidden characters looked for in
//! untrusted text ([`injection`]), the configuration's regexes compiled once
//! ([`patterns`]), built-in patterns compiled for the text they meet ([`two_way`]), and
//! the test-only switches that turn a mitigation off ([`switches`]). It knows nothing of events, tools or runs, so every stage that
//! compares text (the runtime, the sandbox's poisoning checks) uses it from below.

pub mod injection;
pub mod normalize;
pub mod patterns;
pub mod switches;
pub mod two_way;
