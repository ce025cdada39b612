//! A compact arena of decoded values: what the pickle VM and the JSON reader
//! produce before the schema layer (`input::snapshot`) turns it into the typed
//! model. Containers refer to children by index, so a memo reference
//! (BINGET) is a shared node, never a copy: a stack list shared by 100 000
//! trace events is stored once.
//!
//! Three kinds of node stand for values the schema layer took while a pickle
//! was read ([`crate::input::snapshot::TraceSink`]): a trace entry or a
//! segment's block ([`Node::Record`]), a frames list whose items it keeps
//! ([`Node::Stack`]) and a list holding the first records of one of its
//! lists (a device's trace, a segment's blocks), in order ([`Node::Trace`]),
//! which stands for as many `Record` nodes without making them. The pickle machine makes a `Record` or `Stack` node only when such a
//! value is used somewhere else than where PyTorch puts it; otherwise it
//! costs no node at all, only [`Arena::taken`] counts it.

/// Index of a node in a [`Arena`].
pub type Vid = u32;

#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    None,
    Bool(bool),
    Int(i64),
    /// An integer that does not fit in i64 (kept only as a marker; no field
    /// of a snapshot legitimately needs one).
    BigInt,
    Float(f64),
    Str(Box<str>),
    Bytes(Box<[u8]>),
    List(Vec<Vid>),
    Tuple(Box<[Vid]>),
    Dict(Vec<(Vid, Vid)>),
    /// A trace entry's or block's dict converted while reading: (list,
    /// index) in the sink's records.
    Record(u32, u32),
    /// A frames list (or tuple) taken while reading: its items are the
    /// sink's stack number `.0` (the same frame dicts, in order).
    Stack(u32),
    /// A list whose items are the sink's records `0..len` of its list `.0`
    /// (a trace list or a segment's blocks), in order: the same value as a
    /// `List` of those `Record`s.
    Trace(u32, u32),
}

impl Node {
    pub fn kind(&self) -> &'static str {
        match self {
            Node::None => "None",
            Node::Bool(_) => "bool",
            Node::Int(_) | Node::BigInt => "int",
            Node::Float(_) => "float",
            Node::Str(_) => "str",
            Node::Bytes(_) => "bytes",
            Node::List(_) => "list",
            Node::Tuple(_) => "tuple",
            Node::Dict(_) | Node::Record(..) => "dict",
            Node::Stack(_) | Node::Trace(..) => "list",
        }
    }
}

#[derive(Debug, Default)]
pub struct Arena {
    pub nodes: Vec<Node>,
    /// Values taken while reading that have no node (trace entries and
    /// frames lists, and values of a JSON text made one node with an equal
    /// one): what the node count alone would miss of the file's size.
    pub taken: u64,
}

impl Arena {
    pub fn push(&mut self, n: Node) -> Vid {
        let id = self.nodes.len() as Vid;
        self.nodes.push(n);
        id
    }
    /// Decoded values, with or without a node.
    pub fn values(&self) -> u64 {
        self.nodes.len() as u64 + self.taken
    }
    #[inline]
    pub fn get(&self, id: Vid) -> &Node {
        &self.nodes[id as usize]
    }
    pub fn as_str(&self, id: Vid) -> Option<&str> {
        match self.get(id) {
            Node::Str(s) => Some(s),
            _ => None,
        }
    }
    /// Looks a string key up in a dict node.
    pub fn dict_get(&self, dict: &[(Vid, Vid)], key: &str) -> Option<Vid> {
        dict.iter()
            .find(|(k, _)| self.as_str(*k) == Some(key))
            .map(|(_, v)| *v)
    }
}
