//! `tool-args-parse.test.ts` (kimi-loop.md §7.12), plus the schema wording (§4.6).

use loopsim::model::kimi::turn_loop::args::parse_tool_call_arguments;
use loopsim::model::kimi::turn_loop::schema::validation_text;
use serde_json::json;

/// §7.12 #1
#[test]
fn null_and_empty_arguments_are_an_empty_object() {
    for raw in [None, Some("")] {
        let parsed = parse_tool_call_arguments(raw);
        assert_eq!(parsed.data, json!({}));
        assert!(!parsed.parse_failed);
        assert_eq!(parsed.error, None);
    }
}

/// §7.12 #2
#[test]
fn valid_json_is_parsed() {
    let parsed = parse_tool_call_arguments(Some("{\"text\":\"hi\"}"));
    assert_eq!(parsed.data, json!({"text": "hi"}));
    assert!(!parsed.parse_failed);
}

/// §7.12 #3
#[test]
fn trailing_comma_is_a_parse_failure_without_repair() {
    let parsed = parse_tool_call_arguments(Some("{\"text\":\"hi\",}"));
    assert_eq!(parsed.data, json!({}));
    assert!(parsed.parse_failed);
    assert!(parsed.error.is_some());
}

/// §7.12 #4
#[test]
fn concatenated_garbage_is_a_parse_failure() {
    let parsed = parse_tool_call_arguments(Some("{}{"));
    assert_eq!(parsed.data, json!({}));
    assert!(parsed.parse_failed);
}

/// §4.2: valid JSON that is not an object is kept as is.
#[test]
fn non_object_json_is_kept() {
    assert_eq!(parse_tool_call_arguments(Some("42")).data, json!(42));
}

/// §4.6: Ajv wording for the keywords the loop renders specially and a few others.
#[test]
fn schema_errors_use_ajv_wording_joined_by_semicolons() {
    let schema = json!({
        "type": "object",
        "properties": {"text": {"type": "string"}, "n": {"type": "integer", "minimum": 1}},
        "required": ["text"],
        "additionalProperties": false
    });
    assert_eq!(validation_text(&schema, &json!({"text": "x"})), None);
    assert_eq!(
        validation_text(&schema, &json!({"extra": 1, "n": 0})).unwrap(),
        "must have required property 'text'; must NOT have additional property 'extra'; /n must be >= 1"
    );
    assert_eq!(
        validation_text(&schema, &json!([1])).unwrap(),
        "must be object"
    );
    assert_eq!(
        validation_text(&schema, &json!({"text": 5})).unwrap(),
        "/text must be string"
    );
    let enumerated = json!({"type": "string", "enum": ["a", "b"]});
    assert_eq!(
        validation_text(&enumerated, &json!("c")).unwrap(),
        "must be equal to one of the allowed values"
    );
    assert_eq!(
        validation_text(&json!(7), &json!({})).unwrap(),
        "schema must be object or boolean"
    );
}
