//! The bit allocator behind class minors and leaf majors.

/// A 65536-bit set of used numbers with a "lowest free from here" cursor.
pub(super) struct Bits {
    pub(super) words: Vec<u64>,
    pub(super) cursor: u32,
    pub(super) max: u32,
}

impl Bits {
    pub(super) fn new(reserved: impl IntoIterator<Item = u32>, max: u32) -> Bits {
        let mut b = Bits {
            words: vec![0; 1024],
            cursor: 0,
            max,
        };
        for r in reserved {
            b.take(r);
        }
        b
    }

    /// Marks `v` used; false if it already was (or is out of range).
    pub(super) fn take(&mut self, v: u32) -> bool {
        if v > self.max {
            return false;
        }
        let (w, bit) = ((v / 64) as usize, v % 64);
        if self.words[w] & (1 << bit) != 0 {
            return false;
        }
        self.words[w] |= 1 << bit;
        true
    }

    /// The lowest free number at or after the cursor.
    pub(super) fn alloc(&mut self) -> Option<u32> {
        let mut w = (self.cursor / 64) as usize;
        while w < self.words.len() {
            let free = !self.words[w];
            if free != 0 {
                let v = w as u32 * 64 + free.trailing_zeros();
                if v > self.max {
                    return None;
                }
                self.words[w] |= 1 << (v % 64);
                self.cursor = v;
                return Some(v);
            }
            w += 1;
        }
        None
    }
}
