package uninit

// minBytes is the size below which make is used: small blocks come zeroed from the
// allocator's caches almost for free, and the runtime's large-object path, where
// zeroing costs a pass over memory, starts at 32 KiB.
const minBytes = 32 << 10
