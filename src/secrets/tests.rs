use super::*;
use serde_json::json;

// Secrets are built from parts, so that no whole token sits in the source for a
// scanner to flag (and none of these is real).
fn github() -> String {
    format!("ghp_{}", "a1B2c3D4e5F6".repeat(3))
}
fn github_fine_grained() -> String {
    format!("github_pat_11{}_{}", "ABCDEFGH0123456789wx", "Zy9".repeat(20))
}
fn slack() -> String {
    format!("xoxb-{}-{}-{}", "123456789012", "1234567890123", "AbCdEfGhIjKlMnOpQrStUvWx")
}
fn google() -> String {
    format!("AIza{}", "Sy1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7")
}
const AWS_ID: &str = "AKIAIOSFODNN7EXAMPLE";
const AWS_SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
fn pem() -> String {
    format!(
        "-----BEGIN RSA {}-----\nMIIEowIBAAKCAQEA7x9bqZ\nkGx2oR1f+Q==\n-----END RSA {}-----",
        "PRIVATE KEY", "PRIVATE KEY"
    )
}

#[test]
fn keys_tokens_and_jwts_are_scrubbed_and_ordinary_text_is_not() {
    let s = Scrubber::new(&["acct-[0-9]{8}".into()]);
    let mut v = json!({"system": "use sk-proj-abcdefghijklmnop1234 and AKIAABCDEFGHIJKLMNOP",
                       "h": "Bearer abc.def-ghi_jkl123", "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlLXNpZw",
                       "n": ["acct-12345678", "ask-me later", 7]});
    s.value(&mut v);
    assert_eq!(
        v,
        json!({"system": "use [scrubbed] and [scrubbed]", "h": "[scrubbed]", "jwt": "[scrubbed]",
               "n": ["[scrubbed]", "ask-me later", 7]})
    );
    assert_eq!(s.text("nothing secret here"), None);
}

#[test]
fn each_new_kind_is_replaced_keeping_what_a_reviewer_needs() {
    let s = Scrubber::default();
    let cases: Vec<(String, &str, SecretKind)> = vec![
        (format!("token {} ok", github()), "token ghp_[scrubbed] ok", SecretKind::GitHubToken),
        (format!("token {} ok", github_fine_grained()), "token github_pat_[scrubbed] ok", SecretKind::GitHubToken),
        (format!("slack {} ok", slack()), "slack xoxb-[scrubbed] ok", SecretKind::SlackToken),
        (format!("maps key={}&q=1", google()), "maps key=AIza[scrubbed]&q=1", SecretKind::GoogleApiKey),
        (
            format!("key: {}\n{}", pem(), "done"),
            "key: -----BEGIN RSA PRIVATE KEY-----[scrubbed]-----END RSA PRIVATE KEY-----\ndone",
            SecretKind::PrivateKey,
        ),
        (
            "db at postgres://app:hunter2@db.internal:5432/orders".into(),
            "db at postgres://app:[scrubbed]@db.internal:5432/orders",
            SecretKind::UrlPassword,
        ),
        (
            "login?user=ada&password=hunter2&next=/".into(),
            "login?user=ada&password=[scrubbed]&next=/",
            SecretKind::SecretField,
        ),
        (
            r#"config {"client_secret": "s3cr3t value", "port": 5}"#.into(),
            r#"config {"client_secret": "[scrubbed]", "port": 5}"#,
            SecretKind::SecretField,
        ),
        (format!("pair {AWS_ID} / {AWS_SECRET}."), "pair [scrubbed] / [scrubbed].", SecretKind::AwsSecretAccessKey),
    ];
    for (text, expected, kind) in cases {
        assert_eq!(s.text(&text).as_deref(), Some(expected), "{text}");
        assert!(s.kinds(&text).contains(&kind), "{text}: {:?}", s.kinds(&text));
        assert_eq!(s.text(expected), None, "scrubbing twice changed {expected}");
    }
}

#[test]
fn a_pem_block_cut_short_is_scrubbed_to_the_end_of_the_text() {
    let cut = &pem()[..50];
    assert_eq!(Scrubber::default().text(cut).as_deref(), Some("-----BEGIN RSA PRIVATE KEY-----[scrubbed]"));
}

#[test]
fn an_aws_secret_is_scrubbed_beside_its_key_id_or_under_its_name_and_not_alone() {
    let s = Scrubber::default();
    // alone, 40 base64 characters are just that
    assert_eq!(s.text(&format!("value {AWS_SECRET}")), None);
    assert_eq!(
        s.text(&format!("AWS_SECRET_ACCESS_KEY={AWS_SECRET}")).as_deref(),
        Some("AWS_SECRET_ACCESS_KEY=[scrubbed]")
    );
    // one JSON document is one text: the id in one member, the secret in another
    let mut v =
        json!({"id": AWS_ID, "nested": [{"k": AWS_SECRET}], "sha1": "3f786850e387550fdab836ed7e6dc881de23001b"});
    s.value(&mut v);
    assert_eq!(
        v,
        json!({"id": "[scrubbed]", "nested": [{"k": "[scrubbed]"}], "sha1": "3f786850e387550fdab836ed7e6dc881de23001b"})
    );
}

#[test]
fn members_with_a_secrets_name_lose_their_string_value_in_any_case() {
    let mut v = json!({"Password": "hunter2", "db": {"DB_PASSWORD": "x y z", "clientSecret": "abc", "passwd": ""},
                       "aws_secret_access_key": "anything", "secret": 42, "password_policy": "12 characters",
                       "schema": {"properties": {"password": {"type": "string"}}}});
    Scrubber::default().value(&mut v);
    assert_eq!(
        v,
        json!({"Password": "[scrubbed]", "db": {"DB_PASSWORD": "[scrubbed]", "clientSecret": "[scrubbed]", "passwd": ""},
               "aws_secret_access_key": "[scrubbed]", "secret": 42, "password_policy": "12 characters",
               "schema": {"properties": {"password": {"type": "string"}}}})
    );
}

#[test]
fn a_field_rule_also_reads_json_escaped_inside_a_string() {
    // a tool call's arguments as Chat sends them, inside a recording line
    let line = json!({"arguments": "{\"user\":\"ada\",\"password\":\"hunter2\"}"}).to_string();
    let clean = Scrubber::default().text(&line).unwrap();
    assert_eq!(clean, json!({"arguments": "{\"user\":\"ada\",\"password\":\"[scrubbed]\"}"}).to_string());
}

#[test]
fn a_value_that_is_itself_a_token_is_replaced_whole_in_one_scrub() {
    let text = format!("password={}", github());
    let s = Scrubber::default();
    assert_eq!(s.text(&text).as_deref(), Some("password=[scrubbed]"));
    assert_eq!(s.kinds(&text), BTreeSet::from([SecretKind::GitHubToken, SecretKind::SecretField]));
}

#[test]
fn realistic_text_without_a_secret_is_left_exactly_as_it_is() {
    let s = Scrubber::default();
    let texts = [
        "Commit 3f786850e387550fdab836ed7e6dc881de23001b fixed it (sha256 \
         e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855).",
        "Request 123e4567-e89b-12d3-a456-426614174000 took 3 s.",
        "<img src=\"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==\">",
        "Our password policy asks for 12 characters; reset your password under Settings > Security.",
        "Password: Settings > Security > Reset password.",
        "The secret to good bread is time. if password == null { ask(); }",
        "See https://docs.example.com/guide?page=2#setup or http://localhost:8080/v1/chat/completions.",
        "Our risk-assessment-for-the-quarter and task-0123456789abcdefgh are due.",
        "{\"password_policy\":\"strict\",\"max_tokens\":512,\"secretary\":\"Ada\",\"type\":\"password\"}",
        "Bearer bonds and the ghp_ prefix and xoxb- tokens are words here; AIza too.",
    ];
    for text in texts {
        assert_eq!(s.text(text), None, "{text}");
        assert!(s.kinds(text).is_empty(), "{text}");
        let mut v = json!({"content": text, "password_policy": text});
        let before = v.clone();
        s.value(&mut v);
        assert_eq!(v, before, "{text}");
    }
}

#[test]
fn literal_secrets_are_scrubbed_as_written_and_only_as_written() {
    let scrubber = Scrubber::new(&[]).with_literals(["t0ken.a+b", "", "sk-stateval-run-key"]);
    assert_eq!(
        scrubber.text("base http://h/r/t0ken.a+b/v1 key sk-stateval-run-key").as_deref(),
        Some("base http://h/r/[scrubbed]/v1 key [scrubbed]")
    );
    // the literal's dot and plus are not patterns; an empty literal matches nothing
    assert_eq!(scrubber.text("t0kenXa+b t0ken.aab plain"), None);
}

#[test]
fn a_jwt_whose_segment_starts_like_a_key_is_scrubbed_whole() {
    // found by the replacement property: the key detector took the segment first and
    // left the JWT's header and claims in the text
    let s = Scrubber::default();
    for segment in [format!("sk{}", "--__AA-A0a--aA0AA"), github(), google()] {
        for jwt in [format!("eyJaa_-a00-0a.0a__aaaaa-.{segment}"), format!("eyJaa_-a00-0a.{segment}.0a__aaaaa-")] {
            assert_eq!(s.text(&format!("token {jwt} here")).as_deref(), Some("token [scrubbed] here"), "{jwt}");
        }
    }
    // a bearer JWT goes whole with its scheme, as any bearer token does
    let bearer = "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlLXNpZw";
    assert_eq!(s.text(bearer).as_deref(), Some("Authorization: [scrubbed]"));
}
