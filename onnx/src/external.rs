//! External data (`data_location = EXTERNAL`): initializers whose bytes live
//! in a side file, read only when their values are needed.
//!
//! Takes a `TensorProto` whose `external_data` entries name a `location`
//! (relative to the model's folder), an `offset` and a `length` in bytes;
//! gives its element type and shape without touching the file
//! ([`ExternalRef::new`]), and its values on demand ([`ExternalRef::read`]).
//! A model too big for this machine is thus planned from its graph alone:
//! weights stay unread (their graph tensors get a synthetic fill), and only
//! values the import really needs (a constant shape argument, a folded
//! computation) are read. A missing or short file, or an entry pointing
//! outside the model's folder, is an error naming the tensor, the file and
//! the byte range — only when the bytes are needed; never a panic.
//! Source: ONNX IR spec, "External Tensor Data".

use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path, PathBuf};

use onnx_protobuf::TensorProto;

use crate::tensor::{decode, Data, Elem};

/// An initializer kept in an external file.
#[derive(Clone, Debug, PartialEq)]
pub struct ExternalRef {
    /// The tensor's name.
    pub name: String,
    /// The data file (model folder joined with `location`).
    pub file: PathBuf,
    /// First byte in the file.
    pub offset: u64,
    /// Bytes to read (`None`: to the end of the file).
    pub length: Option<u64>,
    /// The tensor without its data (element type, dims).
    header: TensorProto,
}

/// Whether `t` keeps its data in an external file.
pub fn is_external(t: &TensorProto) -> bool {
    t.data_location.value() == 1 || !t.external_data.is_empty()
}

impl ExternalRef {
    /// Element type, shape and data reference of an external tensor of a
    /// model in folder `dir`; reads nothing. Errors: messages naming the
    /// tensor (unknown element type, negative dims, no `location`, a
    /// location outside the model's folder, bad offset/length).
    pub fn new(t: &TensorProto, dir: &Path) -> Result<(Elem, Vec<usize>, ExternalRef), String> {
        let name = if t.name.is_empty() {
            "<unnamed>".to_string()
        } else {
            t.name.clone()
        };
        let elem = Elem::from_code(t.data_type).ok_or_else(|| {
            format!(
                "tensor `{name}` has element type {}, which tofu does not read",
                crate::tensor::type_name(t.data_type)
            )
        })?;
        let mut shape = Vec::with_capacity(t.dims.len());
        for &d in &t.dims {
            if d < 0 {
                return Err(format!("tensor `{name}` has a negative dim {d}"));
            }
            shape.push(d as usize);
        }
        let entry = |k: &str| {
            t.external_data
                .iter()
                .find(|e| e.key == k)
                .map(|e| e.value.as_str())
        };
        let location = entry("location")
            .ok_or_else(|| format!("tensor `{name}` is marked external but names no `location`"))?;
        let rel = Path::new(location);
        if rel.is_absolute()
            || rel
                .components()
                .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(format!(
                "tensor `{name}`: external data location `{location}` must be a relative path inside the model's folder"
            ));
        }
        let num = |k: &str| -> Result<Option<u64>, String> {
            entry(k)
                .map(|v| {
                    v.trim().parse::<u64>().map_err(|_| {
                        format!("tensor `{name}`: external data `{k}` = `{v}` is not a byte count")
                    })
                })
                .transpose()
        };
        let offset = num("offset")?.unwrap_or(0);
        let length = num("length")?;
        let mut header = t.clone();
        header.external_data.clear();
        header.data_location = protobuf::EnumOrUnknown::from_i32(0);
        header.raw_data.clear();
        Ok((
            elem,
            shape,
            ExternalRef {
                name,
                file: dir.join(rel),
                offset,
                length,
                header,
            },
        ))
    }

    /// Read and decode the values (only when they are needed). Errors: a
    /// message naming the tensor, the file and the byte range (missing file,
    /// file shorter than offset + length, a length that does not fit the
    /// shape).
    pub fn read(&self) -> Result<Data, String> {
        let fail = |what: String| {
            format!(
                "tensor `{}` keeps its data in `{}` (bytes {}..{}): {what}",
                self.name,
                self.file.display(),
                self.offset,
                self.length
                    .map_or("end".to_string(), |l| (self.offset + l).to_string())
            )
        };
        let mut f = std::fs::File::open(&self.file).map_err(|e| fail(e.to_string()))?;
        let size = f.metadata().map_err(|e| fail(e.to_string()))?.len();
        let end = match self.length {
            Some(l) => self
                .offset
                .checked_add(l)
                .ok_or_else(|| fail("bad range".into()))?,
            None => size,
        };
        if end > size || self.offset > end {
            return Err(fail(format!("the file holds only {size} bytes")));
        }
        let len = end - self.offset;
        if len > 1 << 34 {
            return Err(fail("too large to read".into()));
        }
        f.seek(SeekFrom::Start(self.offset))
            .map_err(|e| fail(e.to_string()))?;
        let mut raw = vec![0u8; len as usize];
        f.read_exact(&mut raw).map_err(|e| fail(e.to_string()))?;
        let mut t = self.header.clone();
        t.raw_data = raw;
        decode(&t).map_err(fail)
    }
}
