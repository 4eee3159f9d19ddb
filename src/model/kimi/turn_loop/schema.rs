//! Tool argument validation with Ajv v8 wording (kimi-loop.md §4.6, open question 9), checked
//! text for text against Ajv 8.18.0 by `tests/kimi/schema_oracle.rs`.
//!
//! Choice: the reference compiles each tool's JSON Schema with Ajv (`allErrors:true`). This is
//! a subset validator that reproduces Ajv's default texts for the keywords it knows: `type`,
//! `required`, `properties`, `additionalProperties`, `items`, `enum`, `const`, `minimum`,
//! `maximum`, `exclusiveMinimum`, `exclusiveMaximum`, `minLength`, `maxLength`, `minItems`,
//! `maxItems`, `allOf`, `anyOf`, `oneOf`. Other keywords are ignored. Errors are collected
//! in the order Ajv's generated code runs the keywords of one schema level (see `check`):
//! `type`, then `const`, `enum`, `anyOf`, `oneOf`, `allOf`, then the number, string, array and
//! object keywords, each group only on an instance of its type. A failed combinator keeps the
//! errors of the branches it tried (`allErrors`). Deliberate differences: a schema Ajv's
//! meta-schema refuses is not a compile error here, and `format` is not checked.

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

/// Ajv's keyword groups for one data type, in the order its code runs them (Ajv 8's `RULES`:
/// the number, string, array and object groups, each holding the draft-07 keywords of that
/// type, the model's and the ones it ignores). A group runs its keywords when the instance has
/// the group's type, whatever `type` says.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Group {
    Number,
    String,
    Array,
    Object,
}

impl Group {
    const ALL: [Group; 4] = [Group::Number, Group::String, Group::Array, Group::Object];

    fn type_name(self) -> &'static str {
        match self {
            Group::Number => "number",
            Group::String => "string",
            Group::Array => "array",
            Group::Object => "object",
        }
    }

    fn keywords(self) -> &'static [&'static str] {
        match self {
            Group::Number => &[
                "maximum",
                "minimum",
                "exclusiveMaximum",
                "exclusiveMinimum",
                "multipleOf",
                "format",
            ],
            Group::String => &["maxLength", "minLength", "pattern", "format"],
            Group::Array => &[
                "maxItems",
                "minItems",
                "uniqueItems",
                "additionalItems",
                "items",
                "contains",
            ],
            Group::Object => &[
                "maxProperties",
                "minProperties",
                "required",
                "propertyNames",
                "additionalProperties",
                "dependencies",
                "properties",
                "patternProperties",
            ],
        }
    }

    /// Ajv's `shouldUseGroup`: the schema has one of the group's keywords.
    fn used_by(self, keywords: &serde_json::Map<String, Value>) -> bool {
        self.keywords().iter().any(|k| keywords.contains_key(*k))
    }

    fn holds(self, instance: &Value) -> bool {
        match self {
            Group::Number => instance.is_number(),
            Group::String => instance.is_string(),
            Group::Array => instance.is_array(),
            Group::Object => instance.is_object(),
        }
    }
}

/// One schema level, in Ajv 8's order (its `typeAndKeywords` and `schemaKeywords`):
/// 1. `type`, checked up front, unless exactly one type is named and the schema has a keyword
///    of that type's group; then its error is reported where that group runs;
/// 2. the keywords of no type: `const`, `enum`, `anyOf`, `oneOf`, `allOf`;
/// 3. the number, string, array and object groups.
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
    let type_error = || format!("must be {}", type_names.join(","));
    let deferred_to = match type_names.as_slice() {
        [only] => Group::ALL
            .into_iter()
            .find(|group| group.type_name() == *only && group.used_by(keywords)),
        _ => None,
    };
    if deferred_to.is_none()
        && !type_names.is_empty()
        && !type_names.iter().any(|name| type_matches(name, instance))
    {
        push(errors, path, "type", type_error());
    }
    if let Some(constant) = keywords.get("const")
        && !js_equal(constant, instance)
    {
        push(
            errors,
            path,
            "const",
            "must be equal to constant".to_owned(),
        );
    }
    if let Some(Value::Array(allowed)) = keywords.get("enum")
        && !allowed.iter().any(|value| js_equal(value, instance))
    {
        push(
            errors,
            path,
            "enum",
            "must be equal to one of the allowed values".to_owned(),
        );
    }
    check_combinators(keywords, instance, path, errors);
    for group in Group::ALL {
        if !group.used_by(keywords) {
            continue;
        }
        if group.holds(instance) {
            match group {
                Group::Number => check_number(keywords, instance, path, errors),
                Group::String => check_string(keywords, instance, path, errors),
                Group::Array => check_array(keywords, instance, path, errors),
                Group::Object => check_object(keywords, instance, path, errors),
            }
        } else if deferred_to == Some(group) {
            push(errors, path, "type", type_error());
        }
    }
}

/// JavaScript's deep equality, which Ajv's `const` and `enum` use (`fast-deep-equal`): numbers
/// by value (`1` and `1.0` are one number), objects whatever their key order.
fn js_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| js_equal(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(key, value)| y.get(key).is_some_and(|other| js_equal(value, other)))
        }
        _ => a == b,
    }
}

/// A number as JavaScript prints it (`String(n)`), which is how Ajv shows a limit: `1.0` reads
/// `1`, `1e21` reads `1e+21`, `0.000001` stays, `1e-7` reads `1e-7` (ECMAScript Number::toString).
fn js_number_text(number: f64) -> String {
    let magnitude = number.abs();
    if number == 0.0 {
        "0".to_owned()
    } else if (1e-6..1e21).contains(&magnitude) {
        format!("{number}")
    } else {
        let text = format!("{number:e}");
        match text.split_once('e') {
            Some((mantissa, exponent)) if !exponent.starts_with('-') => {
                format!("{mantissa}e+{exponent}")
            }
            _ => text,
        }
    }
}

/// A length or count limit: a non-negative whole number, however it is written (`2.0` is 2,
/// as JSON.parse reads it). Ajv refuses to compile any other value, so none reaches here from
/// a schema the CLI accepts.
fn count_limit(value: Option<&Value>) -> Option<u64> {
    value?
        .as_f64()
        .filter(|f| *f >= 0.0 && f.fract() == 0.0)
        .map(|f| f as u64)
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
            push(
                errors,
                path,
                keyword,
                format!("must be {comparison} {}", js_number_text(limit)),
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
    if let Some(limit) = count_limit(keywords.get("maxLength"))
        && length > limit
    {
        push(
            errors,
            path,
            "maxLength",
            format!("must NOT have more than {limit} characters"),
        );
    }
    if let Some(limit) = count_limit(keywords.get("minLength"))
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
    if let Some(limit) = count_limit(keywords.get("maxItems"))
        && length > limit
    {
        push(
            errors,
            path,
            "maxItems",
            format!("must NOT have more than {limit} items"),
        );
    }
    if let Some(limit) = count_limit(keywords.get("minItems"))
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

/// `anyOf`, `oneOf` and `allOf`, in Ajv's order. With `allErrors`, Ajv keeps the errors of the
/// branches it tried when the combinator fails, then adds its own; when it passes, none stay.
/// `anyOf` stops at the first branch that passes; `oneOf` at the second (its generated code
/// nests each later branch in the `else` of "this one passed too").
fn check_combinators(
    keywords: &serde_json::Map<String, Value>,
    instance: &Value,
    path: &str,
    errors: &mut Vec<SchemaError>,
) {
    if let Some(Value::Array(any)) = keywords.get("anyOf") {
        let mut tried = Vec::new();
        let mut passed = false;
        for schema in any {
            let before = tried.len();
            check(schema, instance, path, &mut tried);
            if tried.len() == before {
                passed = true;
                break;
            }
        }
        if !passed {
            errors.append(&mut tried);
            push(
                errors,
                path,
                "anyOf",
                "must match a schema in anyOf".to_owned(),
            );
        }
    }
    if let Some(Value::Array(one)) = keywords.get("oneOf") {
        let mut tried = Vec::new();
        let mut passing = 0;
        for schema in one {
            let before = tried.len();
            check(schema, instance, path, &mut tried);
            passing += usize::from(tried.len() == before);
            if passing == 2 {
                break;
            }
        }
        if passing != 1 {
            errors.append(&mut tried);
            push(
                errors,
                path,
                "oneOf",
                "must match exactly one schema in oneOf".to_owned(),
            );
        }
    }
    if let Some(Value::Array(all)) = keywords.get("allOf") {
        for schema in all {
            check(schema, instance, path, errors);
        }
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
            Some("/n must be < 10")
        );
        assert_eq!(
            bound("exclusiveMaximum", 10.0, 10.5).as_deref(),
            Some("/n must be < 10")
        );
        assert_eq!(bound("exclusiveMinimum", 0.0, 0.5), None);
        assert_eq!(
            bound("exclusiveMinimum", 0.0, 0.0).as_deref(),
            Some("/n must be > 0")
        );
        assert_eq!(
            bound("exclusiveMinimum", 0.0, -0.5).as_deref(),
            Some("/n must be > 0")
        );
    }

    #[test]
    fn inclusive_bounds_admit_the_bound_itself() {
        assert_eq!(bound("maximum", 10.0, 10.0), None);
        assert_eq!(
            bound("maximum", 10.0, 10.5).as_deref(),
            Some("/n must be <= 10")
        );
        assert_eq!(bound("minimum", 0.0, 0.0), None);
        assert_eq!(
            bound("minimum", 0.0, -0.5).as_deref(),
            Some("/n must be >= 0")
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
