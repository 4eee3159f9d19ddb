//! Tool argument validation with Ajv v8 wording (kimi-loop.md §4.6, open question 9).
//!
//! Choice: the reference compiles each tool's JSON Schema with Ajv (`allErrors:true`). This is
//! a subset validator that reproduces Ajv's default texts for the keywords it knows: `type`,
//! `required`, `properties`, `additionalProperties`, `items`, `enum`, `const`, `minimum`,
//! `maximum`, `exclusiveMinimum`, `exclusiveMaximum`, `minLength`, `maxLength`, `minItems`,
//! `maxItems`, `allOf`, `anyOf`, `oneOf`. Other keywords are ignored. Errors are collected
//! in Ajv's keyword order for one schema level: `type` (which, when it fails, skips the
//! type-specific keywords), then object (`required`, `additionalProperties`, `properties`),
//! number, string and array keywords, then `const`, `enum` and the combinators.

use serde_json::Value;

/// One validation error: the JSON-pointer path of the instance and the keyword's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError {
    /// `instancePath` (`""` at the root, `/value` for a property).
    pub instance_path: String,
    /// The keyword.
    pub keyword: &'static str,
    /// The property concerned, for `required` and `additionalProperties`.
    pub property: Option<String>,
    /// Ajv's message.
    pub message: String,
}

impl SchemaError {
    /// The loop's rendering (kimi-loop.md §4.6): `required` and `additionalProperties` get
    /// their own texts; anything else reads `<instancePath> <message>`, or just the message at
    /// the root.
    pub fn render(&self) -> String {
        match (self.keyword, &self.property) {
            ("required", Some(property)) => format!("must have required property '{property}'"),
            ("additionalProperties", Some(property)) => {
                format!("must NOT have additional property '{property}'")
            }
            _ if self.instance_path.is_empty() => self.message.clone(),
            _ => format!("{} {}", self.instance_path, self.message),
        }
    }
}

/// Validate `instance` against `schema`. `Err` carries either the errors or, if the schema
/// itself is unusable, the compile message (as `Err(Err(message))`).
pub fn validate(schema: &Value, instance: &Value) -> Result<(), Result<Vec<SchemaError>, String>> {
    match schema {
        Value::Bool(true) | Value::Object(_) => {}
        Value::Bool(false) => {
            return Err(Ok(vec![SchemaError {
                instance_path: String::new(),
                keyword: "false schema",
                property: None,
                message: "boolean schema is false".to_owned(),
            }]));
        }
        _ => return Err(Err("schema must be object or boolean".to_owned())),
    }
    let mut errors = Vec::new();
    check(schema, instance, "", &mut errors);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Ok(errors))
    }
}

/// The joined text the loop puts after `Invalid args for tool "<name>": `.
pub fn validation_text(schema: &Value, instance: &Value) -> Option<String> {
    match validate(schema, instance) {
        Ok(()) => None,
        Err(Ok(errors)) if errors.is_empty() => Some("Tool parameter validation failed".to_owned()),
        Err(Ok(errors)) => Some(
            errors
                .iter()
                .map(SchemaError::render)
                .collect::<Vec<_>>()
                .join("; "),
        ),
        Err(Err(compile)) => Some(compile),
    }
}

fn push(errors: &mut Vec<SchemaError>, path: &str, keyword: &'static str, message: String) {
    errors.push(SchemaError {
        instance_path: path.to_owned(),
        keyword,
        property: None,
        message,
    });
}

fn type_matches(name: &str, instance: &Value) -> bool {
    match name {
        "object" => instance.is_object(),
        "array" => instance.is_array(),
        "string" => instance.is_string(),
        "boolean" => instance.is_boolean(),
        "null" => instance.is_null(),
        "number" => instance.is_number(),
        "integer" => match instance {
            Value::Number(number) => {
                number.is_i64()
                    || number.is_u64()
                    || number.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            _ => false,
        },
        _ => true,
    }
}

fn check(schema: &Value, instance: &Value, path: &str, errors: &mut Vec<SchemaError>) {
    let Value::Object(keywords) = schema else {
        if schema == &Value::Bool(false) {
            push(
                errors,
                path,
                "false schema",
                "boolean schema is false".to_owned(),
            );
        }
        return;
    };
    let type_names: Vec<&str> = match keywords.get("type") {
        Some(Value::String(name)) => vec![name.as_str()],
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !type_names.is_empty() && !type_names.iter().any(|name| type_matches(name, instance)) {
        push(
            errors,
            path,
            "type",
            format!("must be {}", type_names.join(",")),
        );
    } else {
        check_object(keywords, instance, path, errors);
        check_number(keywords, instance, path, errors);
        check_string(keywords, instance, path, errors);
        check_array(keywords, instance, path, errors);
    }
    if let Some(constant) = keywords.get("const")
        && constant != instance
    {
        push(
            errors,
            path,
            "const",
            "must be equal to constant".to_owned(),
        );
    }
    if let Some(Value::Array(allowed)) = keywords.get("enum")
        && !allowed.contains(instance)
    {
        push(
            errors,
            path,
            "enum",
            "must be equal to one of the allowed values".to_owned(),
        );
    }
    check_combinators(keywords, instance, path, errors);
}

fn check_object(
    keywords: &serde_json::Map<String, Value>,
    instance: &Value,
    path: &str,
    errors: &mut Vec<SchemaError>,
) {
    let Value::Object(object) = instance else {
        return;
    };
    if let Some(Value::Array(required)) = keywords.get("required") {
        for property in required.iter().filter_map(Value::as_str) {
            if !object.contains_key(property) {
                errors.push(SchemaError {
                    instance_path: path.to_owned(),
                    keyword: "required",
                    property: Some(property.to_owned()),
                    message: format!("must have required property '{property}'"),
                });
            }
        }
    }
    let properties = keywords.get("properties").and_then(Value::as_object);
    match keywords.get("additionalProperties") {
        Some(Value::Bool(false)) => {
            for key in object.keys() {
                if !properties.is_some_and(|known| known.contains_key(key)) {
                    errors.push(SchemaError {
                        instance_path: path.to_owned(),
                        keyword: "additionalProperties",
                        property: Some(key.clone()),
                        message: "must NOT have additional properties".to_owned(),
                    });
                }
            }
        }
        Some(extra @ Value::Object(_)) => {
            for (key, value) in object {
                if !properties.is_some_and(|known| known.contains_key(key)) {
                    check(extra, value, &child_path(path, key), errors);
                }
            }
        }
        _ => {}
    }
    if let Some(properties) = properties {
        for (key, subschema) in properties {
            if let Some(value) = object.get(key) {
                check(subschema, value, &child_path(path, key), errors);
            }
        }
    }
}

fn child_path(path: &str, key: &str) -> String {
    let escaped = key.replace('~', "~0").replace('/', "~1");
    format!("{path}/{escaped}")
}

/// A numeric keyword, its comparison text and its check.
type NumberLimit = (&'static str, &'static str, fn(f64, f64) -> bool);

fn check_number(
    keywords: &serde_json::Map<String, Value>,
    instance: &Value,
    path: &str,
    errors: &mut Vec<SchemaError>,
) {
    let Some(value) = instance.as_f64() else {
        return;
    };
    let limits: [NumberLimit; 4] = [
        ("maximum", "<=", |v, l| v <= l),
        ("minimum", ">=", |v, l| v >= l),
        ("exclusiveMaximum", "<", |v, l| v < l),
        ("exclusiveMinimum", ">", |v, l| v > l),
    ];
    for (keyword, comparison, ok) in limits {
        if let Some(limit) = keywords.get(keyword).and_then(Value::as_f64)
            && !ok(value, limit)
        {
            let shown = keywords
                .get(keyword)
                .map(Value::to_string)
                .unwrap_or_default();
            push(
                errors,
                path,
                keyword,
                format!("must be {comparison} {shown}"),
            );
        }
    }
}

fn check_string(
    keywords: &serde_json::Map<String, Value>,
    instance: &Value,
    path: &str,
    errors: &mut Vec<SchemaError>,
) {
    let Some(text) = instance.as_str() else {
        return;
    };
    // Ajv counts Unicode code points.
    let length = text.chars().count() as u64;
    if let Some(limit) = keywords.get("maxLength").and_then(Value::as_u64)
        && length > limit
    {
        push(
            errors,
            path,
            "maxLength",
            format!("must NOT have more than {limit} characters"),
        );
    }
    if let Some(limit) = keywords.get("minLength").and_then(Value::as_u64)
        && length < limit
    {
        push(
            errors,
            path,
            "minLength",
            format!("must NOT have fewer than {limit} characters"),
        );
    }
}

fn check_array(
    keywords: &serde_json::Map<String, Value>,
    instance: &Value,
    path: &str,
    errors: &mut Vec<SchemaError>,
) {
    let Value::Array(items) = instance else {
        return;
    };
    let length = items.len() as u64;
    if let Some(limit) = keywords.get("maxItems").and_then(Value::as_u64)
        && length > limit
    {
        push(
            errors,
            path,
            "maxItems",
            format!("must NOT have more than {limit} items"),
        );
    }
    if let Some(limit) = keywords.get("minItems").and_then(Value::as_u64)
        && length < limit
    {
        push(
            errors,
            path,
            "minItems",
            format!("must NOT have fewer than {limit} items"),
        );
    }
    if let Some(item_schema) = keywords.get("items").filter(|schema| !schema.is_array()) {
        for (index, item) in items.iter().enumerate() {
            check(item_schema, item, &format!("{path}/{index}"), errors);
        }
    }
}

fn check_combinators(
    keywords: &serde_json::Map<String, Value>,
    instance: &Value,
    path: &str,
    errors: &mut Vec<SchemaError>,
) {
    let passes = |schema: &Value| {
        let mut scratch = Vec::new();
        check(schema, instance, path, &mut scratch);
        scratch.is_empty()
    };
    if let Some(Value::Array(all)) = keywords.get("allOf") {
        for schema in all {
            check(schema, instance, path, errors);
        }
    }
    if let Some(Value::Array(any)) = keywords.get("anyOf")
        && !any.iter().any(passes)
    {
        push(
            errors,
            path,
            "anyOf",
            "must match a schema in anyOf".to_owned(),
        );
    }
    if let Some(Value::Array(one)) = keywords.get("oneOf")
        && one.iter().filter(|schema| passes(schema)).count() != 1
    {
        push(
            errors,
            path,
            "oneOf",
            "must match exactly one schema in oneOf".to_owned(),
        );
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The rendered texts of validating `value` against `{"type":"number", keyword: limit}` at
    /// `/n` (kimi-loop.md §4.6, open question 9: Ajv v8's default wording).
    fn bound(keyword: &str, limit: f64, value: f64) -> Option<String> {
        let schema =
            json!({"type": "object", "properties": {"n": {"type": "number", keyword: limit}}});
        validation_text(&schema, &json!({ "n": value }))
    }

    #[test]
    fn exclusive_bounds_reject_the_bound_itself() {
        // JSON Schema draft 2020-12 (Ajv v8): exclusiveMaximum admits only values below it,
        // exclusiveMinimum only values above it.
        assert_eq!(bound("exclusiveMaximum", 10.0, 9.5), None);
        assert_eq!(
            bound("exclusiveMaximum", 10.0, 10.0).as_deref(),
            Some("/n must be < 10.0")
        );
        assert_eq!(
            bound("exclusiveMaximum", 10.0, 10.5).as_deref(),
            Some("/n must be < 10.0")
        );
        assert_eq!(bound("exclusiveMinimum", 0.0, 0.5), None);
        assert_eq!(
            bound("exclusiveMinimum", 0.0, 0.0).as_deref(),
            Some("/n must be > 0.0")
        );
        assert_eq!(
            bound("exclusiveMinimum", 0.0, -0.5).as_deref(),
            Some("/n must be > 0.0")
        );
    }

    #[test]
    fn inclusive_bounds_admit_the_bound_itself() {
        assert_eq!(bound("maximum", 10.0, 10.0), None);
        assert_eq!(
            bound("maximum", 10.0, 10.5).as_deref(),
            Some("/n must be <= 10.0")
        );
        assert_eq!(bound("minimum", 0.0, 0.0), None);
        assert_eq!(
            bound("minimum", 0.0, -0.5).as_deref(),
            Some("/n must be >= 0.0")
        );
    }

    /// Ajv v8's array length keywords: `maxItems` admits up to the limit, `minItems` from it.
    #[test]
    fn array_length_limits_admit_the_limit_itself() {
        let schema = json!({"type": "array", "maxItems": 2, "minItems": 1});
        assert_eq!(validation_text(&schema, &json!([1, 2])), None);
        assert_eq!(validation_text(&schema, &json!([1])), None);
        assert_eq!(
            validation_text(&schema, &json!([1, 2, 3])).as_deref(),
            Some("must NOT have more than 2 items")
        );
        assert_eq!(
            validation_text(&schema, &json!([])).as_deref(),
            Some("must NOT have fewer than 1 items")
        );
    }

    #[test]
    fn integer_bounds_show_the_limit_as_the_schema_wrote_it() {
        let schema = json!({"type": "integer", "exclusiveMaximum": 3, "minimum": 1});
        assert_eq!(validation_text(&schema, &json!(2)), None);
        assert_eq!(
            validation_text(&schema, &json!(3)).as_deref(),
            Some("must be < 3")
        );
        assert_eq!(
            validation_text(&schema, &json!(0)).as_deref(),
            Some("must be >= 1")
        );
    }

    /// JSON Schema's `integer` is a number with no fractional part, however it is written: a
    /// model may send `2.0` for a count, and `2.5` is not an integer.
    #[test]
    fn integer_takes_whole_numbers_written_as_floats_and_refuses_fractions() {
        let schema = json!({"type": "integer"});
        assert_eq!(validation_text(&schema, &json!(2)), None);
        assert_eq!(validation_text(&schema, &json!(2.0)), None);
        assert_eq!(
            validation_text(&schema, &json!(2.5)).as_deref(),
            Some("must be integer")
        );
    }
}
