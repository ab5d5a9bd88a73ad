//! The JSON-lines format of `trellis run` (and `trellis respond --json`).
//!
//! In, one request per line: `trellis retrieve`'s (`{"id", "history", "entities"}`, see
//! [`crate::retrieve::jsonl`]) and optionally `"knowledge"`, paths that replace retrieval
//! (`[]`: no knowledge), each a list of triples written as `trellis retrieve` writes them
//! (`{"head", "relation", "tail", "reverse"}`, the stored fact and whether the path walks
//! it backwards) or as `[head, relation, tail]` in walking order (`~relation` walks
//! backwards); and `"seed"`, the request's sampling seed.
//! Out, one line per request, in input order (the CLI adds `"line"`, the input line
//! number): `{"id", "response", "mentioned": [names],
//! "paths": [{"score", "triples"}] (retrieved only), "knowledge": [[[head, relation, tail],
//! ...], ...] (what the generator read, walking order), "timings": {"link_ms",
//! "retrieve_ms", "generate_ms", "batch"}}`, and `"responses": [{"text", "score", "finish"}]`
//! when more than one sequence was asked for (with `"fact_score"` when checked); with a
//! checker, `"fact_check"`: the reply's claims and scores as `trellis check` writes them;
//! with `rewrite`, `"resolutions"`: the resolved pronouns and references (`trellis link --json`'s
//! mentions of kind `"resolved"`, each with its `resolution`), when there are any.

use super::Reply;
use crate::generate::{KnowledgePath, Triple};
use crate::retrieve::jsonl::{parse_request, Request, RequestError};
use serde_json::{json, Value};

/// A `trellis run` request.
pub struct PipelineLine {
    /// The request's id, history and entities, as `trellis retrieve` reads them.
    pub request: Request,
    /// Knowledge given instead of retrieving (`Some(vec![])`: none at all).
    pub knowledge: Option<Vec<KnowledgePath>>,
    /// The request's sampling seed (`None`: the settings').
    pub seed: Option<u64>,
}

/// What is wrong with one request line (its own fault: `--on-error skip` skips it).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LineError {
    /// The retrieve part of the request is malformed.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// `"knowledge"` is not a list of lists.
    #[error("\"knowledge\" must be a list of paths, each a list of triples")]
    KnowledgeNotAList,
    /// A triple that is neither form.
    #[error("knowledge[{path}][{triple}]: a triple is {{\"head\", \"relation\", \"tail\", \"reverse\"}} or [head, relation, tail] with string names")]
    BadTriple {
        /// The path's 0-based position.
        path: usize,
        /// The triple's 0-based position in it.
        triple: usize,
    },
    /// A path whose triples do not chain, or with no triple or more than two.
    #[error("knowledge[{path}]: {problem}")]
    BadPath {
        /// The path's 0-based position.
        path: usize,
        /// What is wrong with it.
        problem: crate::generate::KnowledgeProblem,
    },
    /// `"seed"` is not a non-negative integer.
    #[error("\"seed\" must be a non-negative integer")]
    BadSeed,
}

/// Parses one input line as read from a file (any bytes; the newline removed).
pub fn parse_line_bytes(line: &[u8]) -> Result<PipelineLine, LineError> {
    let text = std::str::from_utf8(line).map_err(|e| RequestError::InvalidUtf8 { byte: e.valid_up_to() })?;
    parse_line(text)
}

/// Parses one input line; the error says what is wrong with it.
pub fn parse_line(line: &str) -> Result<PipelineLine, LineError> {
    let request = parse_request(line)?;
    // parse_request accepted it, so it is a JSON object.
    let v: Value = serde_json::from_str(line).map_err(RequestError::InvalidJson)?;
    let knowledge = match v.get("knowledge") {
        None | Some(Value::Null) => None,
        Some(Value::Array(paths)) => Some(
            paths
                .iter()
                .enumerate()
                .map(|(p, path)| {
                    let triples = path.as_array().ok_or(LineError::KnowledgeNotAList)?;
                    let path: KnowledgePath =
                        triples.iter().enumerate().map(|(t, v)| triple(v).ok_or(LineError::BadTriple { path: p, triple: t })).collect::<Result<_, _>>()?;
                    crate::generate::encoding::check_path(&path).map_err(|problem| LineError::BadPath { path: p, problem })?;
                    Ok(path)
                })
                .collect::<Result<Vec<_>, LineError>>()?,
        ),
        Some(_) => return Err(LineError::KnowledgeNotAList),
    };
    let seed = match v.get("seed") {
        None | Some(Value::Null) => None,
        Some(s) => Some(s.as_u64().ok_or(LineError::BadSeed)?),
    };
    Ok(PipelineLine { request, knowledge, seed })
}

fn triple(v: &Value) -> Option<Triple> {
    match v {
        Value::Array(a) if a.len() == 3 => Some(Triple::new(a[0].as_str()?, a[1].as_str()?, a[2].as_str()?)),
        Value::Object(o) => {
            let (h, r, t) = (o.get("head")?.as_str()?, o.get("relation")?.as_str()?, o.get("tail")?.as_str()?);
            match o.get("reverse") {
                None | Some(Value::Bool(false)) => Some(Triple::new(h, r, t)),
                Some(Value::Bool(true)) => Some(Triple::new(t, format!("~{r}"), h)),
                Some(_) => None,
            }
        }
        _ => None,
    }
}

/// A triple of the knowledge as `trellis retrieve` writes one: the stored fact and whether
/// the path walks it backwards.
fn stored(t: &Triple) -> Value {
    match t.relation.strip_prefix('~') {
        Some(r) => json!({"head": t.tail, "relation": r, "tail": t.head, "reverse": true}),
        None => json!({"head": t.head, "relation": t.relation, "tail": t.tail, "reverse": false}),
    }
}

/// The output line of one reply.
pub fn render(id: &Value, reply: &Reply) -> Value {
    let knowledge: Vec<Vec<[&str; 3]>> =
        reply.knowledge.iter().map(|p| p.iter().map(|t| [t.head.as_str(), t.relation.as_str(), t.tail.as_str()]).collect()).collect();
    let mut v = json!({
        "id": id,
        "response": reply.text(),
        "mentioned": reply.mentioned_names,
        "knowledge": knowledge,
        "timings": reply.timings,
    });
    if !reply.paths.is_empty() {
        // The knowledge paths are the retrieved ones, in the same order.
        let paths: Vec<Value> =
            reply.paths.iter().zip(&reply.knowledge).map(|(p, k)| json!({"score": p.score, "triples": k.iter().map(stored).collect::<Vec<_>>()})).collect();
        v["paths"] = Value::Array(paths);
    }
    if reply.responses.len() > 1 {
        let checked = |i: usize| reply.checks.get(i).map(|c| c.fact_score);
        v["responses"] = json!(reply
            .responses
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let mut r = json!({"text": g.text, "score": g.score, "finish": g.finish});
                if let Some(f) = checked(i) {
                    r["fact_score"] = json!(f);
                }
                r
            })
            .collect::<Vec<_>>());
    }
    if !reply.resolutions.is_empty() {
        v["resolutions"] = json!(reply.resolutions);
    }
    if let Some(c) = reply.checks.first() {
        let mut check = render_check(&Value::Null, c);
        if let Some(o) = check.as_object_mut() {
            o.remove("id");
        }
        v["fact_check"] = check;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_their_errors() {
        let l = parse_line(
            r#"{"id": 1, "history": ["hi"], "knowledge": [[["A", "~r", "B"], {"head": "C", "relation": "s", "tail": "B", "reverse": true}]], "seed": 7}"#,
        )
        .unwrap();
        assert_eq!(l.knowledge.as_ref().unwrap()[0], vec![Triple::new("A", "~r", "B"), Triple::new("B", "~s", "C")]);
        assert_eq!(l.seed, Some(7));
        assert_eq!(stored(&Triple::new("B", "~s", "C")), json!({"head": "C", "relation": "s", "tail": "B", "reverse": true}));
        let none = parse_line(r#"{"history": [], "knowledge": []}"#).unwrap();
        assert_eq!(none.knowledge, Some(vec![]));
        assert!(parse_line(r#"{"history": []}"#).unwrap().knowledge.is_none());
        let err = |line: &str| parse_line(line).err().unwrap().to_string();
        assert_eq!(err(r#"{"history": [], "knowledge": 3}"#), "\"knowledge\" must be a list of paths, each a list of triples");
        assert_eq!(
            err(r#"{"history": [], "knowledge": [[["A", "r"]]]}"#),
            "knowledge[0][0]: a triple is {\"head\", \"relation\", \"tail\", \"reverse\"} or [head, relation, tail] with string names"
        );
        assert_eq!(
            err(r#"{"history": [], "knowledge": [[["A", "r", "B"], ["C", "s", "D"]]]}"#),
            "knowledge[0]: triple 1 starts at \"C\", not at \"B\" where the one before ended"
        );
        assert_eq!(err(r#"{"history": [], "seed": -1}"#), "\"seed\" must be a non-negative integer");
        assert_eq!(err(r#"{"history": 1}"#), "no \"history\" list");
    }
}

/// A `trellis check` input line: a `trellis run` request's `"id"` and `"history"` and the
/// `"reply"` to check (`"response"`, as `trellis run` writes it, is read too).
pub struct CheckLine {
    /// The request's id and history (its `"entities"`, if any, are not read).
    pub request: Request,
    /// The reply to check.
    pub reply: String,
}

/// What is wrong with a `trellis check` input line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckLineError {
    /// The request part is malformed.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// No `"reply"` (or `"response"`) string, or both.
    #[error("needs one \"reply\" (or \"response\") string")]
    NoReply,
    /// A reply longer than a dialog may hold.
    #[error("the reply is {bytes} bytes, over the limit of {limit}")]
    ReplyTooLong {
        /// Its length.
        bytes: usize,
        /// The limit (`limits::DIALOG_BYTES`).
        limit: usize,
    },
}

/// Parses one `trellis check` line as read from a file.
pub fn parse_check_line_bytes(line: &[u8]) -> Result<CheckLine, CheckLineError> {
    let text = std::str::from_utf8(line).map_err(|e| RequestError::InvalidUtf8 { byte: e.valid_up_to() })?;
    parse_check_line(text)
}

/// Parses one `trellis check` line; the error says what is wrong with it.
pub fn parse_check_line(line: &str) -> Result<CheckLine, CheckLineError> {
    let request = parse_request(line)?;
    let v: Value = serde_json::from_str(line).map_err(RequestError::InvalidJson)?;
    let reply = match (v.get("reply"), v.get("response")) {
        (Some(Value::String(r)), None) | (None, Some(Value::String(r))) => r.clone(),
        _ => return Err(CheckLineError::NoReply),
    };
    let limit = crate::limits::DIALOG_BYTES;
    let total = request.history.iter().map(|m| m.text.len()).sum::<usize>() + reply.len();
    if total > limit {
        return Err(CheckLineError::ReplyTooLong { bytes: reply.len(), limit });
    }
    Ok(CheckLine { request, reply })
}

/// The output line of one checked reply: `{"id", "fact_score", "neip", "supported",
/// "refuted", "not_enough_info", "claims": [...]}`.
pub fn render_check(id: &Value, check: &crate::check::ReplyCheck) -> Value {
    json!({
        "id": id,
        "fact_score": check.fact_score,
        "neip": check.neip,
        "supported": check.supported,
        "refuted": check.refuted,
        "not_enough_info": check.not_enough_info,
        "claims": check.claims,
    })
}
