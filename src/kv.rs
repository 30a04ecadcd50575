//! The KV-cache pool: `max_total_num_tokens` slots allocated in pages of `page_size` tokens.
//!
//! Mirrors SGLang's token-to-KV pool allocator (`mem_cache/allocator.py`): `available_size()`
//! is the free slots, always a whole number of pages. The pool itself knows no cache: the KV the
//! radix cache keeps (SGLang's *evictable* tokens) is held here as used, and the scheduler adds
//! it back where SGLang does (`Sglang::free_tokens`, `available + evictable`, for admission;
//! `Sglang::usage_tokens`, used less evictable, for the `token usage` log field). Without the
//! cache, or with workloads that share no prefixes and the cache off, nothing is evictable.

/// The pool. Invariant: `used_pages ≤ total_pages`.
#[derive(Clone, Debug)]
pub struct KvPool {
    page_size: u64,
    total_pages: u64,
    used_pages: u64,
}

/// Pages needed to hold `tokens` tokens.
pub fn pages_for(tokens: u64, page_size: u64) -> u64 {
    tokens.div_ceil(page_size)
}

impl KvPool {
    /// A pool of `capacity_tokens` (a multiple of `page_size`).
    pub fn new(capacity_tokens: u64, page_size: u64) -> Self {
        assert!(page_size > 0, "invariant: page size is at least one token");
        KvPool {
            page_size,
            total_pages: capacity_tokens / page_size,
            used_pages: 0,
        }
    }

    /// Tokens per page.
    pub fn page_size(&self) -> u64 {
        self.page_size
    }

    /// The pool's size in tokens (`max_total_num_tokens`).
    pub fn capacity_tokens(&self) -> u64 {
        self.total_pages * self.page_size
    }

    /// Slots in use, the radix cache's included (SGLang's `#token` is this less the evictable
    /// tokens).
    pub fn used_tokens(&self) -> u64 {
        self.used_pages * self.page_size
    }

    /// Free slots (SGLang's `available_size()`).
    pub fn available_tokens(&self) -> u64 {
        (self.total_pages - self.used_pages) * self.page_size
    }

    /// Slots in use over the pool (SGLang's `token usage` when nothing is evictable).
    pub fn usage(&self) -> f64 {
        self.used_pages as f64 / self.total_pages as f64
    }

    /// Take `pages` pages. Panics if they are not free: callers check first, as SGLang does.
    pub fn alloc_pages(&mut self, pages: u64) {
        assert!(
            self.used_pages + pages <= self.total_pages,
            "invariant: KV allocation of {pages} pages exceeds the pool ({} of {} used)",
            self.used_pages,
            self.total_pages
        );
        self.used_pages += pages;
    }

    /// Return `pages` pages.
    pub fn free_pages(&mut self, pages: u64) {
        assert!(
            pages <= self.used_pages,
            "invariant: freeing more KV pages than are in use"
        );
        self.used_pages -= pages;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_round_up_and_usage_counts_whole_pages() {
        let mut kv = KvPool::new(64, 16);
        assert_eq!(pages_for(17, 16), 2);
        kv.alloc_pages(pages_for(17, 16));
        assert_eq!(kv.used_tokens(), 32);
        assert_eq!(kv.available_tokens(), 32);
        assert!((kv.usage() - 0.5).abs() < 1e-12);
        kv.free_pages(2);
        assert_eq!(kv.used_tokens(), 0);
    }

    #[test]
    #[should_panic(expected = "exceeds the pool")]
    fn over_allocation_is_a_broken_invariant() {
        let mut kv = KvPool::new(16, 1);
        kv.alloc_pages(17);
    }
}
