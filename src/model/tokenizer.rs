//! Entity and relation names as the retriever writes them: token ids in linearization
//! context.
//!
//! A name inside a linearized path sits between boundary tokens (`[Head] name [Int1]`).
//! With T5's Metaspace pre-tokenizer and added special tokens, the ids of a name depend on
//! that context (the special tokens split the text; the spaces around the name become `▁`
//! pieces), so names are encoded *in context* and the ids between the two boundary tokens
//! are kept: exactly what the model emits for the name inside a path.

use tokenizers::Tokenizer;

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("{path}: cannot load the tokenizer: {what}")]
    Load { path: String, what: String },
    #[error("the tokenizer has no token {token:?}; it is needed as the {role} boundary (see --entity-context / --relation-context)")]
    MissingBoundary { token: String, role: &'static str },
    #[error("tokenizing {text:?}: {what}")]
    Encode { text: String, what: String },
}

/// Which dictionary a name belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Entity = 0,
    Relation = 1,
}

/// How names appear in a linearized path (method-notes.md): between which boundary tokens,
/// lowercased or not, which relation characters become spaces.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct TokenContext {
    pub entity_open: String,
    pub entity_close: String,
    pub relation_open: String,
    pub relation_close: String,
    pub lowercase: bool,
    /// Characters of relation names written as spaces (`_`, `-`).
    pub relation_spaces: String,
}

impl Default for TokenContext {
    fn default() -> Self {
        TokenContext {
            entity_open: "[Head]".into(),
            entity_close: "[Int1]".into(),
            relation_open: "[Int1]".into(),
            relation_close: "[Int2]".into(),
            lowercase: true,
            relation_spaces: "_-".into(),
        }
    }
}

pub struct NameTokenizer {
    tokenizer: Tokenizer,
    fingerprint: u64,
    context: TokenContext,
    /// (open, close) ids per side.
    bounds: [(u32, u32); 2],
}

/// FNV-1a, 64 bits: a stable fingerprint that needs no extra dependency.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

impl NameTokenizer {
    /// Loads a Hugging Face `tokenizer.json`. The fingerprint is taken over its canonical
    /// JSON (keys sorted), so formatting does not change it.
    pub fn from_file(path: &std::path::Path, context: TokenContext) -> Result<NameTokenizer, ModelError> {
        let display = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| ModelError::Load { path: display.clone(), what: e.to_string() })?;
        let value: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| ModelError::Load { path: display.clone(), what: format!("not JSON: {e}") })?;
        let fingerprint = fnv1a64(value.to_string().as_bytes());
        let tokenizer = Tokenizer::from_bytes(&bytes).map_err(|e| ModelError::Load { path: display, what: e.to_string() })?;
        let id = |token: &str, role: &'static str| {
            tokenizer.token_to_id(token).ok_or_else(|| ModelError::MissingBoundary { token: token.to_owned(), role })
        };
        let bounds = [
            (id(&context.entity_open, "entity opening")?, id(&context.entity_close, "entity closing")?),
            (id(&context.relation_open, "relation opening")?, id(&context.relation_close, "relation closing")?),
        ];
        Ok(NameTokenizer { tokenizer, fingerprint, context, bounds })
    }

    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    pub fn context(&self) -> &TokenContext {
        &self.context
    }

    pub fn vocab_size(&self) -> usize {
        self.tokenizer.get_vocab_size(true)
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The name as the linearization writes it (lowercased, relation separators as spaces).
    pub fn linearized(&self, side: Side, name: &str) -> String {
        let mut s = if self.context.lowercase { name.to_lowercase() } else { name.to_owned() };
        if side == Side::Relation {
            s = s.chars().map(|c| if self.context.relation_spaces.contains(c) { ' ' } else { c }).collect();
        }
        s
    }

    /// The text of a name in its context: `open name close`.
    pub fn in_context(&self, side: Side, name: &str) -> String {
        let (open, close) = match side {
            Side::Entity => (&self.context.entity_open, &self.context.entity_close),
            Side::Relation => (&self.context.relation_open, &self.context.relation_close),
        };
        format!("{open} {} {close}", self.linearized(side, name))
    }

    /// Token ids of each name as written inside a path (parallel over the batch).
    pub fn encode(&self, side: Side, names: &[&str]) -> Result<Vec<Vec<u32>>, ModelError> {
        let texts: Vec<String> = names.iter().map(|n| self.in_context(side, n)).collect();
        let encodings = self
            .tokenizer
            .encode_batch(texts.clone(), false)
            .map_err(|e| ModelError::Encode { text: texts.first().cloned().unwrap_or_default(), what: e.to_string() })?;
        let (open, close) = self.bounds[side as usize];
        encodings
            .iter()
            .zip(&texts)
            .map(|(enc, text)| {
                let ids = enc.get_ids();
                let start = ids.iter().position(|&t| t == open);
                let end = start.and_then(|s| ids[s + 1..].iter().position(|&t| t == close).map(|p| s + 1 + p));
                match (start, end) {
                    (Some(s), Some(e)) => Ok(ids[s + 1..e].to_vec()),
                    _ => Err(ModelError::Encode { text: text.clone(), what: "the boundary tokens did not survive tokenization".into() }),
                }
            })
            .collect()
    }
}
