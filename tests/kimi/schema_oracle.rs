//! The agent loop's tool-argument validator (`model::kimi::turn_loop::schema`) against the
//! validator the published Kimi Code CLI runs: Ajv 8.18.0, draft-07, `strict: false`,
//! `allErrors: true`, with the CLI's rendering of each error (kimi-loop.md §4.6, open question
//! 9). Thousands of generated schemas of the model's keyword subset, each with an instance aimed
//! at its edges (a bound, one past it, a whole number written as a float, a missing or extra
//! property, a combinator that two branches match), are judged by both; every text must be the
//! same byte for byte.
//!
//! The generator stays inside what the model claims: its keywords, valid schemas, property names
//! that are not array indices (JavaScript orders integer-like keys first, a difference no tool's
//! schema meets), and numbers that print the same in both languages' shortest form.

use std::path::Path;

use loopsim::model::kimi::turn_loop::schema::validation_text;
use rand::{RngExt as _, SeedableRng as _};
use rand_chacha::ChaCha8Rng;
use serde_json::{Map, Value, json};

use crate::common::{installed_by, node_answers};

/// The generator's seed (`LOOPSIM_SCHEMA_ORACLE_SEED`, default a fixed one).
fn seed() -> u64 {
    std::env::var("LOOPSIM_SCHEMA_ORACLE_SEED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0x5c4e3a)
}

/// How many cases one run judges (`LOOPSIM_SCHEMA_ORACLE_CASES`, default 4,000: about two
/// seconds of Node).
fn case_count() -> usize {
    std::env::var("LOOPSIM_SCHEMA_ORACLE_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(4_000)
}

/// Property names: plain, with the two characters a JSON pointer escapes, with a space and with
/// a character outside ASCII.
const NAMES: [&str; 8] = [
    "path",
    "mode",
    "n",
    "items",
    "a/b",
    "x~y",
    "two words",
    "été",
];

/// Numeric limits, as a schema writes them: integers, fractions, and whole numbers written as
/// floats (`1.0`, which Ajv shows as `1`).
fn limit(rng: &mut ChaCha8Rng) -> Value {
    match rng.random_range(0..10u32) {
        8 => json!(1e21),
        9 => json!(1.5e-7),
        0 => json!(0),
        1 => json!(1),
        2 => json!(3),
        3 => json!(-2),
        4 => json!(2.5),
        5 => json!(1.0),
        6 => json!(100),
        _ => json!(0.5),
    }
}

/// A length or count limit below `bound`, sometimes written as a float (`2.0`, which JSON.parse
/// reads as the integer Ajv's meta-schema asks for).
fn count(rng: &mut ChaCha8Rng, bound: u64) -> Value {
    let n = rng.random_range(0..bound);
    if rng.random_bool(0.25) {
        json!(n as f64)
    } else {
        json!(n)
    }
}

/// `value` with its whole numbers written the other way (`1` as `1.0`, `1.0` as `1`): the same
/// value to JavaScript, which `const` and `enum` compare by.
fn respelled(value: &Value) -> Value {
    match value {
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => json!(i as f64),
            (None, Some(f)) if f.fract() == 0.0 && f.abs() < 1e15 => json!(f as i64),
            _ => value.clone(),
        },
        Value::Array(items) => Value::Array(items.iter().map(respelled).collect()),
        Value::Object(object) => Value::Object(
            object
                .iter()
                .rev()
                .map(|(key, value)| (key.clone(), respelled(value)))
                .collect(),
        ),
        _ => value.clone(),
    }
}

fn name(rng: &mut ChaCha8Rng) -> &'static str {
    NAMES[rng.random_range(0..NAMES.len())]
}

/// A scalar or small composite for `const` and `enum`, and for instances off the schema's aim.
fn any_value(rng: &mut ChaCha8Rng, depth: u32) -> Value {
    match rng.random_range(0..if depth == 0 { 7 } else { 9u32 }) {
        0 => Value::Null,
        1 => json!(rng.random_bool(0.5)),
        2 => json!(rng.random_range(-2..4i64)),
        3 => json!([1.0, 2.5, 3.0, -0.5][rng.random_range(0..4)]),
        4 => json!(["", "a", "abc", "😀x"][rng.random_range(0..4)]),
        5 => json!(name(rng)),
        6 => json!(rng.random_range(0..3i64) as f64),
        7 => Value::Array(
            (0..rng.random_range(0..3))
                .map(|_| any_value(rng, depth - 1))
                .collect(),
        ),
        _ => {
            let mut object = Map::new();
            for _ in 0..rng.random_range(0..3) {
                object.insert(name(rng).to_owned(), any_value(rng, depth - 1));
            }
            Value::Object(object)
        }
    }
}

const TYPES: [&str; 7] = [
    "object", "array", "string", "number", "integer", "boolean", "null",
];

/// A schema of the model's keyword subset.
fn schema(rng: &mut ChaCha8Rng, depth: u32) -> Value {
    if depth > 0 && rng.random_bool(0.04) {
        return json!(rng.random_bool(0.7));
    }
    let mut keywords = Map::new();
    let kind = if depth == 3 {
        "object"
    } else {
        TYPES[rng.random_range(0..TYPES.len())]
    };
    match rng.random_range(0..10u32) {
        0 => {}
        1 => {
            let other = TYPES[rng.random_range(0..TYPES.len())];
            let kinds = if other == kind {
                vec![kind]
            } else {
                vec![kind, other]
            };
            keywords.insert("type".into(), json!(kinds));
        }
        _ => {
            keywords.insert("type".into(), json!(kind));
        }
    }
    let chance = |rng: &mut ChaCha8Rng| rng.random_bool(0.35);
    match kind {
        "object" if depth > 0 => {
            let mut properties = Map::new();
            for _ in 0..rng.random_range(0..4) {
                properties.insert(name(rng).to_owned(), schema(rng, depth - 1));
            }
            if !properties.is_empty() || chance(rng) {
                keywords.insert("properties".into(), Value::Object(properties));
            }
            if chance(rng) || depth == 3 {
                let required: Vec<&str> = (0..rng.random_range(1..4)).map(|_| name(rng)).collect();
                let mut unique: Vec<&str> = Vec::new();
                for name in required {
                    if !unique.contains(&name) {
                        unique.push(name);
                    }
                }
                keywords.insert("required".into(), json!(unique));
            }
            match rng.random_range(0..5u32) {
                0 => {
                    keywords.insert("additionalProperties".into(), json!(false));
                }
                1 => {
                    keywords.insert("additionalProperties".into(), json!(true));
                }
                2 => {
                    keywords.insert("additionalProperties".into(), schema(rng, depth - 1));
                }
                _ => {}
            }
        }
        "array" if depth > 0 => {
            if chance(rng) {
                keywords.insert("minItems".into(), count(rng, 3));
            }
            if chance(rng) {
                keywords.insert("maxItems".into(), count(rng, 4));
            }
            if rng.random_bool(0.6) {
                keywords.insert("items".into(), schema(rng, depth - 1));
            }
        }
        "string" => {
            if chance(rng) {
                keywords.insert("minLength".into(), count(rng, 4));
            }
            if chance(rng) {
                keywords.insert("maxLength".into(), count(rng, 4));
            }
        }
        "number" | "integer" => {
            for keyword in ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"] {
                if chance(rng) {
                    keywords.insert(keyword.into(), limit(rng));
                }
            }
        }
        _ => {}
    }
    if rng.random_bool(0.1) {
        // A keyword of another type's group: Ajv applies it to instances of that type whatever
        // `type` says, and it moves where a single type's error is reported.
        let (keyword, value) = [
            ("maximum", json!(1)),
            ("minLength", json!(2)),
            ("maxItems", json!(1)),
            ("required", json!(["n"])),
        ][rng.random_range(0..4)]
        .clone();
        keywords.entry(keyword).or_insert(value);
    }
    if rng.random_bool(0.08) {
        keywords.insert("const".into(), any_value(rng, 1));
    }
    if rng.random_bool(0.1) {
        let mut allowed: Vec<Value> = Vec::new();
        for _ in 0..rng.random_range(1..4) {
            let value = any_value(rng, 1);
            if !allowed.iter().any(|known| js_equal(known, &value)) {
                allowed.push(value);
            }
        }
        keywords.insert("enum".into(), Value::Array(allowed));
    }
    if depth > 0 {
        for combinator in ["allOf", "anyOf", "oneOf"] {
            if rng.random_bool(0.08) {
                let branches: Vec<Value> = (0..rng.random_range(1..4))
                    .map(|_| schema(rng, depth - 1))
                    .collect();
                keywords.insert(combinator.into(), Value::Array(branches));
            }
        }
    }
    Value::Object(keywords)
}

/// JavaScript's deep equality (Ajv's `fast-deep-equal`): numbers by value, so `1` and `1.0`
/// are one value, and objects regardless of key order. Ajv refuses an `enum` with two equal
/// entries.
fn js_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| js_equal(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| js_equal(v, w)))
        }
        _ => a == b,
    }
}

/// A number near one of the schema's limits: on it, one past it either way, half past it, or
/// the same whole number written as a float.
fn number_near(rng: &mut ChaCha8Rng, keywords: &Map<String, Value>) -> Value {
    let limits: Vec<f64> = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]
        .iter()
        .filter_map(|k| keywords.get(*k).and_then(Value::as_f64))
        .collect();
    let base = if limits.is_empty() {
        rng.random_range(-2..4i64) as f64
    } else {
        limits[rng.random_range(0..limits.len())]
    };
    let value = base + [0.0, 1.0, -1.0, 0.5, -0.5][rng.random_range(0..5)];
    if value.fract() == 0.0 && rng.random_bool(0.6) {
        json!(value as i64)
    } else {
        json!(value)
    }
}

/// An instance aimed at `schema`: mostly of its type and near its limits, sometimes anything.
fn instance(rng: &mut ChaCha8Rng, schema: &Value, depth: u32) -> Value {
    let Value::Object(keywords) = schema else {
        return any_value(rng, depth.min(2));
    };
    if rng.random_bool(0.12) {
        return any_value(rng, depth.min(2));
    }
    if let Some(Value::Array(allowed)) = keywords.get("enum")
        && rng.random_bool(0.5)
    {
        let chosen = &allowed[rng.random_range(0..allowed.len())];
        return if rng.random_bool(0.5) {
            respelled(chosen)
        } else {
            chosen.clone()
        };
    }
    if let Some(constant) = keywords.get("const")
        && rng.random_bool(0.5)
    {
        return if rng.random_bool(0.5) {
            respelled(constant)
        } else {
            constant.clone()
        };
    }
    for combinator in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = keywords.get(combinator)
            && rng.random_bool(0.3)
        {
            let branch = &branches[rng.random_range(0..branches.len())];
            return instance(rng, branch, depth);
        }
    }
    let kind = match keywords.get("type") {
        Some(Value::String(kind)) => kind.clone(),
        Some(Value::Array(kinds)) => kinds[rng.random_range(0..kinds.len())]
            .as_str()
            .unwrap_or("null")
            .to_owned(),
        _ => TYPES[rng.random_range(0..TYPES.len())].to_owned(),
    };
    match kind.as_str() {
        "object" => {
            let mut object = Map::new();
            let properties = keywords.get("properties").and_then(Value::as_object);
            if let Some(Value::Array(required)) = keywords.get("required") {
                for key in required.iter().filter_map(Value::as_str) {
                    if rng.random_bool(0.8) {
                        let sub = properties.and_then(|p| p.get(key)).unwrap_or(&Value::Null);
                        object.insert(key.to_owned(), instance(rng, sub, depth.saturating_sub(1)));
                    }
                }
            }
            if let Some(properties) = properties {
                for (key, sub) in properties {
                    if rng.random_bool(0.6) && depth > 0 {
                        object.insert(key.clone(), instance(rng, sub, depth - 1));
                    }
                }
            }
            if rng.random_bool(0.3) {
                let extra = keywords.get("additionalProperties").unwrap_or(&Value::Null);
                let value = instance(rng, extra, depth.saturating_sub(1));
                object.insert(name(rng).to_owned(), value);
            }
            Value::Object(object)
        }
        "array" => {
            let items = keywords.get("items").cloned().unwrap_or(Value::Null);
            let count = rng.random_range(0..5);
            Value::Array(
                (0..count)
                    .map(|_| instance(rng, &items, depth.saturating_sub(1)))
                    .collect(),
            )
        }
        "string" => {
            let length = rng.random_range(0..5);
            let text: String = (0..length)
                .map(|_| ['a', 'b', 'é', '😀'][rng.random_range(0..4)])
                .collect();
            json!(text)
        }
        "number" | "integer" => number_near(rng, keywords),
        "boolean" => json!(rng.random_bool(0.5)),
        _ => Value::Null,
    }
}

/// Ajv's judgement of each `(schema, instance)`, in order: `{"text": …}` or `{"compile": …}`.
fn ajv_judges(modules: &Path, cases: &[(Value, Value)]) -> Vec<Value> {
    let lines: Vec<Value> = cases
        .iter()
        .map(|(schema, instance)| json!({"schema": schema, "instance": instance}))
        .collect();
    node_answers(
        "tests/kimi/ajv/oracle.cjs",
        &[],
        &[("NODE_PATH", modules.as_os_str())],
        &lines,
    )
}

/// The generated cases of `seed`.
fn cases(seed: u64, count: usize) -> Vec<(Value, Value)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..count)
        .map(|_| {
            let depth = rng.random_range(1..4);
            let schema = schema(&mut rng, depth);
            let instance = instance(&mut rng, &schema, depth);
            (schema, instance)
        })
        .collect()
}

#[test]
fn the_validator_words_every_generated_case_as_the_published_clis_ajv_does() {
    let Some(modules) = installed_by("tests/kimi/ajv/setup.sh") else {
        return;
    };
    let cases = cases(seed(), case_count());
    let verdicts = ajv_judges(&modules, &cases);
    if let Some(file) = std::env::var_os("LOOPSIM_SCHEMA_ORACLE_DUMP") {
        // Each case with Ajv's verdict, one JSON line each: tests/mutants/schema.sh judges
        // mutants of the validator against them without Node.
        let lines: String = cases
            .iter()
            .zip(&verdicts)
            .map(|((schema, instance), verdict)| {
                let case = json!({"schema": schema, "instance": instance, "ajv": verdict});
                format!("{case}\n")
            })
            .collect();
        std::fs::write(&file, lines).expect("the dump file is writable");
    }
    let mut rejected = 0;
    let mut differences = Vec::new();
    for ((schema, instance), verdict) in cases.iter().zip(&verdicts) {
        if let Some(compile) = verdict.get("compile") {
            panic!("the generator wrote a schema Ajv does not compile ({compile}): {schema}");
        }
        let ajv = verdict["text"].as_str().map(str::to_owned);
        rejected += usize::from(ajv.is_some());
        let ours = validation_text(schema, instance);
        if ours != ajv {
            differences.push(format!(
                "schema:   {schema}\ninstance: {instance}\nmodel:    {ours:?}\najv:      {ajv:?}"
            ));
        }
    }
    println!(
        "schema oracle: seed {}, {} cases, {rejected} rejected by Ajv, {} worded differently",
        seed(),
        cases.len(),
        differences.len()
    );
    assert!(
        differences.is_empty(),
        "{} of {} cases differ from Ajv 8.18.0; the first:\n\n{}",
        differences.len(),
        cases.len(),
        differences[..differences.len().min(6)].join("\n\n")
    );
}
