//! Reading a version 2 cassette line by line, strictly: every error names the file, the line and the key.

use super::*;

// --- reading ------------------------------------------------------------------------------------

/// A JSON object being read strictly: every key must be taken, and errors name the key by its
/// path from the line's top (`response.sse[3].data`).
pub(crate) struct Fields<'a> {
    map: &'a Map<String, Value>,
    at: String,
    taken: Vec<&'static str>,
    origin: &'a str,
    line: usize,
    kind: CassetteErrorKind,
}

impl<'a> Fields<'a> {
    fn new(
        map: &'a Map<String, Value>,
        at: &str,
        origin: &'a str,
        line: usize,
        kind: CassetteErrorKind,
    ) -> Self {
        Fields {
            map,
            at: at.to_string(),
            taken: Vec::new(),
            origin,
            line,
            kind,
        }
    }

    fn path(&self, key: &str) -> String {
        if self.at.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.at)
        }
    }

    fn err(&self, key: &str, m: impl Into<String>) -> CassetteError {
        CassetteError::at(
            self.origin,
            self.line,
            self.kind,
            format!("key `{}`: {}", self.path(key), m.into()),
        )
    }

    fn opt(&mut self, key: &'static str) -> Option<&'a Value> {
        self.taken.push(key);
        self.map.get(key)
    }

    fn req(&mut self, key: &'static str) -> Result<&'a Value, CassetteError> {
        self.opt(key).ok_or_else(|| self.err(key, "missing"))
    }

    fn req_str(&mut self, key: &'static str) -> Result<&'a str, CassetteError> {
        let v = self.req(key)?;
        v.as_str()
            .ok_or_else(|| self.err(key, format!("expected a string, found {}", json_kind(v))))
    }

    fn opt_str(&mut self, key: &'static str) -> Result<Option<&'a str>, CassetteError> {
        match self.opt(key) {
            None => Ok(None),
            Some(v) => v
                .as_str()
                .map(Some)
                .ok_or_else(|| self.err(key, format!("expected a string, found {}", json_kind(v)))),
        }
    }

    fn req_u64(&mut self, key: &'static str) -> Result<u64, CassetteError> {
        let v = self.req(key)?;
        v.as_u64().ok_or_else(|| {
            self.err(
                key,
                format!("expected a non-negative integer, found {}", show(v)),
            )
        })
    }

    fn opt_u64(&mut self, key: &'static str) -> Result<Option<u64>, CassetteError> {
        match self.opt(key) {
            None => Ok(None),
            Some(v) => v.as_u64().map(Some).ok_or_else(|| {
                self.err(
                    key,
                    format!("expected a non-negative integer, found {}", show(v)),
                )
            }),
        }
    }

    fn req_obj(&mut self, key: &'static str) -> Result<Fields<'a>, CassetteError> {
        let v = self.req(key)?;
        let Some(m) = v.as_object() else {
            return Err(self.err(key, format!("expected an object, found {}", json_kind(v))));
        };
        Ok(Fields::new(
            m,
            &self.path(key),
            self.origin,
            self.line,
            self.kind,
        ))
    }

    /// Every key not taken is an error, the first (in the line's order) named.
    fn finish(self) -> Result<(), CassetteError> {
        match self.map.keys().find(|k| !self.taken.contains(&k.as_str())) {
            Some(k) => Err(CassetteError::at(
                self.origin,
                self.line,
                self.kind,
                format!("key `{}`: unknown key", self.path(k)),
            )),
            None => Ok(()),
        }
    }
}

pub(crate) fn show(v: &Value) -> String {
    match v {
        Value::Number(n) => format!("`{n}`"),
        other => json_kind(other).to_string(),
    }
}

pub(crate) fn object_line(
    line: &str,
    origin: &str,
    n: usize,
) -> Result<Map<String, Value>, CassetteError> {
    let shape = "expected an exchange or end line (a JSON object)";
    let err = |m: String| CassetteError::at(origin, n, CassetteErrorKind::Line, m);
    if line.trim().is_empty() {
        return Err(err(format!("{shape}, found an empty line")));
    }
    match serde_json::from_str::<Value>(line) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(other) => Err(err(format!("{shape}, found {}", json_kind(&other)))),
        Err(e) => Err(err(format!("{shape}: {e}"))),
    }
}

pub(crate) fn parse_header(line: &str, origin: &str) -> Result<RecordingHeader, CassetteError> {
    let err = |kind, m: String| CassetteError::at(origin, 1, kind, m);
    let expected = r#"expected a cassette header {"loopsim_cassette":2,...}"#;
    let value: Value = serde_json::from_str(line)
        .map_err(|e| err(CassetteErrorKind::Header, format!("{expected}: {e}")))?;
    let Some(obj) = value.as_object() else {
        return Err(err(
            CassetteErrorKind::Header,
            format!("{expected}, found {}", json_kind(&value)),
        ));
    };
    let mut f = Fields::new(obj, "", origin, 1, CassetteErrorKind::Header);
    let Some(version) = f.opt("loopsim_cassette") else {
        return Err(err(
            CassetteErrorKind::Header,
            format!("{expected}: no `loopsim_cassette` field"),
        ));
    };
    if version.as_u64() != Some(RECORDING_VERSION) {
        return Err(err(
            CassetteErrorKind::Version,
            format!(
                "unknown cassette version {version} (this build reads versions {CASSETTE_VERSION} and {RECORDING_VERSION})"
            ),
        ));
    }
    let layer_name = f.req_str("layer")?;
    let layer = Layer::from_name(layer_name).ok_or_else(|| {
        f.err(
            "layer",
            format!("unknown layer {layer_name:?} (this build reads \"letta\", \"provider\")"),
        )
    })?;
    let recorder = f.req_str("recorder")?.to_string();
    let source = f.req_str("source")?.to_string();
    let format = match f.opt_str("format")? {
        None => None,
        Some(name) => Some(StreamFormat::from_name(name).ok_or_else(|| {
            f.err(
                "format",
                format!(
                    "unknown provider format {name:?} (this build reads {})",
                    StreamFormat::names()
                ),
            )
        })?),
    };
    let note = f.opt_str("note")?.map(str::to_string);
    f.finish()?;
    let h = RecordingHeader {
        layer,
        recorder,
        source,
        format,
        note,
    };
    check_header(&h).map_err(|m| err(CassetteErrorKind::Header, m))?;
    Ok(h)
}

pub(crate) fn parse_end(
    obj: Map<String, Value>,
    origin: &str,
    n: usize,
) -> Result<(u64, u64), CassetteError> {
    let mut f = Fields::new(&obj, "", origin, n, CassetteErrorKind::Line);
    let t = f.req_u64("t")?;
    let end = f.req_str("end")?;
    if end != "complete" {
        return Err(f.err("end", format!("expected \"complete\", found {end:?}")));
    }
    let count = f.req_u64("exchanges")?;
    f.finish()?;
    Ok((t, count))
}

pub(crate) fn parse_headers(
    f: &mut Fields<'_>,
    key: &'static str,
) -> Result<Vec<(String, String)>, CassetteError> {
    let v = f.req(key)?;
    let Some(items) = v.as_array() else {
        return Err(f.err(
            key,
            format!(
                "expected an array of [name, value] pairs, found {}",
                json_kind(v)
            ),
        ));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| match item.as_array().map(Vec::as_slice) {
            Some([Value::String(k), Value::String(v)]) => Ok((k.clone(), v.clone())),
            _ => Err(f.err(
                &format!("{key}[{i}]"),
                "expected a [name, value] pair of strings",
            )),
        })
        .collect()
}

pub(crate) fn parse_body(f: &mut Fields<'_>, key: &'static str) -> Result<Body, CassetteError> {
    let Some(v) = f.opt(key) else {
        return Ok(Body::Empty);
    };
    let Some(m) = v.as_object().filter(|m| m.len() == 1) else {
        return Err(f.err(
            key,
            "expected an object with one of \"json\", \"text\", \"base64\"",
        ));
    };
    let (k, v) = m.iter().next().expect("one entry");
    match (k.as_str(), v) {
        ("json", v) => Ok(Body::Json(v.clone())),
        ("text", Value::String(s)) if !s.is_empty() => Ok(Body::Text(s.clone())),
        ("base64", Value::String(s)) if !s.is_empty() => base64_decode(s)
            .map(Body::Binary)
            .map_err(|e| f.err(&format!("{key}.base64"), e)),
        ("text" | "base64", _) => Err(f.err(
            &format!("{key}.{k}"),
            "expected a non-empty string (an empty body has no `body` key)",
        )),
        (other, _) => Err(f.err(
            &format!("{key}.{other}"),
            "unknown key (expected \"json\", \"text\" or \"base64\")",
        )),
    }
}

pub(crate) fn parse_frame(
    v: &Value,
    at: &str,
    origin: &str,
    n: usize,
) -> Result<TimedFrame, CassetteError> {
    let Some(m) = v.as_object() else {
        return Err(CassetteError::at(
            origin,
            n,
            CassetteErrorKind::Line,
            format!(
                "key `{at}`: expected a frame object, found {}",
                json_kind(v)
            ),
        ));
    };
    let mut f = Fields::new(m, at, origin, n, CassetteErrorKind::Line);
    let t_ms = f.req_u64("t")?;
    let frame = if let Some(c) = f.opt_str("comment")? {
        SseFrame::Comment(c.to_string())
    } else {
        let data = f
            .opt_str("data")?
            .ok_or_else(|| f.err("data", "missing (a frame has \"data\" or \"comment\")"))?;
        SseFrame::Event(SseEvent {
            event: f.opt_str("event")?.map(str::to_string),
            data: data.to_string(),
            id: f.opt_str("id")?.map(str::to_string),
            retry: f.opt_u64("retry")?,
        })
    };
    f.finish()?;
    Ok(TimedFrame { t_ms, frame })
}

pub(crate) fn parse_exchange(
    obj: Map<String, Value>,
    origin: &str,
    line: usize,
    expected_n: u64,
) -> Result<Exchange, CassetteError> {
    let mut f = Fields::new(&obj, "", origin, line, CassetteErrorKind::Line);
    let n = f.req_u64("n")?;
    if n != expected_n {
        return Err(f.err(
            "n",
            format!("exchange number {n}, expected {expected_n} (exchanges are numbered from 1 in order)"),
        ));
    }
    let t_ms = f.req_u64("t")?;
    let method = f.req_str("method")?.to_string();
    let path = f.req_str("path")?.to_string();

    let mut rq = f.req_obj("request")?;
    let request = RecordedRequest {
        headers: parse_headers(&mut rq, "headers")?,
        body: parse_body(&mut rq, "body")?,
    };
    rq.finish()?;

    let mut rs = f.req_obj("response")?;
    let rt = rs.req_u64("t")?;
    let response = if let Some(error) = rs.opt_str("failed")? {
        RecordedResponse::Failed {
            t_ms: rt,
            error: error.to_string(),
        }
    } else {
        let status_v = rs.req("status")?;
        let status = status_v
            .as_u64()
            .and_then(|s| u16::try_from(s).ok())
            .ok_or_else(|| {
                rs.err(
                    "status",
                    format!("expected an HTTP status, found {}", show(status_v)),
                )
            })?;
        let headers = parse_headers(&mut rs, "headers")?;
        let body = match rs.opt("sse") {
            Some(Value::Array(items)) => {
                if rs.map.contains_key("body") {
                    return Err(rs.err("body", "a response has \"body\" or \"sse\", not both"));
                }
                let frames = items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| parse_frame(v, &format!("response.sse[{i}]"), origin, line))
                    .collect::<Result<Vec<_>, _>>()?;
                ResponseBody::Sse(frames)
            }
            Some(other) => {
                return Err(rs.err(
                    "sse",
                    format!("expected an array of frames, found {}", json_kind(other)),
                ));
            }
            None => ResponseBody::Whole(parse_body(&mut rs, "body")?),
        };
        let mut e = rs.req_obj("end")?;
        let end_t = e.req_u64("t")?;
        let kind_name = e.req_str("end")?;
        let kind = EndKind::from_name(kind_name).ok_or_else(|| {
            e.err(
                "end",
                format!("unknown end {kind_name:?} (expected \"clean\", \"reset\" or \"stall\")"),
            )
        })?;
        let by_client = match e.opt_str("by")? {
            None => false,
            Some("client") => true,
            Some(other) => {
                return Err(e.err("by", format!("expected \"client\", found {other:?}")));
            }
        };
        e.finish()?;
        RecordedResponse::Answered(Answer {
            t_ms: rt,
            status,
            headers,
            body,
            end: BodyEnd {
                t_ms: end_t,
                kind,
                by_client,
            },
        })
    };
    rs.finish()?;

    let mut k = f.req_obj("key")?;
    let key = MatchKey {
        method: k.req_str("method")?.to_string(),
        path: k.req_str("path")?.to_string(),
        body: k.req_str("body")?.to_string(),
    };
    k.finish()?;
    f.finish()?;
    Ok(Exchange {
        t_ms,
        method,
        path,
        request,
        response,
        key,
    })
}
