//! The dense tensors the interpreter and the opaque functions exchange.

/// A dense row-major f64 tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    /// Elements per dim.
    pub shape: Vec<usize>,
    /// `shape.iter().product()` elements, row-major.
    pub data: Vec<f64>,
}

impl Tensor {
    /// A tensor of zeros.
    pub fn zeros(shape: &[usize]) -> Self {
        Tensor {
            shape: shape.to_vec(),
            data: vec![0.0; shape.iter().product()],
        }
    }

    /// A tensor from its elements. Errors if `data.len()` is not the shape's product.
    pub fn new(shape: &[usize], data: Vec<f64>) -> Result<Self, String> {
        let n: usize = shape.iter().product();
        if n != data.len() {
            return Err(format!(
                "shape {shape:?} needs {n} elements, got {}",
                data.len()
            ));
        }
        Ok(Tensor {
            shape: shape.to_vec(),
            data,
        })
    }

    /// A scalar (rank-0) tensor.
    pub fn scalar(v: f64) -> Self {
        Tensor {
            shape: vec![],
            data: vec![v],
        }
    }

    /// Row-major flat offset of an in-bounds index, or `None` if out of bounds.
    pub fn offset(&self, index: &[i64]) -> Option<usize> {
        if index.len() != self.shape.len() {
            return None;
        }
        let mut off = 0usize;
        for (&i, &n) in index.iter().zip(&self.shape) {
            if i < 0 || i as usize >= n {
                return None;
            }
            off = off * n + i as usize;
        }
        Some(off)
    }

    /// Element at an in-bounds index.
    pub fn get(&self, index: &[i64]) -> Option<f64> {
        self.offset(index).map(|o| self.data[o])
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}
