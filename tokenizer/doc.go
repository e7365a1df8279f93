// Package tokenizer reads Hugging Face tokenizer.json files and encodes and decodes text the
// way the HF tokenizers library does, for the BPE model family that Gemma tokenizers use.
//
// The encode pipeline mirrors the library's: added tokens that are not normalized are cut
// out of the raw text first (so special tokens such as <bos> or <|turn> are never split),
// every remaining piece is normalized, normalized added tokens are cut out next, the
// pre-tokenizer splits what is left into words, and the BPE model turns each word into ids
// (merging by rank, falling back to <0xNN> byte tokens or the unknown token). Encode is the
// plain encoding: no post-processor template runs and no BOS is added, because DiffusionGemma's
// chat template writes <bos> itself.
//
// Supported components: the BPE model (vocab, merges in both the "a b" and ["a","b"] forms,
// byte_fallback, unk_token, fuse_unk, ignore_merges, continuing_subword_prefix,
// end_of_word_suffix); normalizers Replace, Prepend, NFC, NFD, NFKC, NFKD, Lowercase,
// Strip, ByteLevel and Sequence; pre-tokenizers Split, Metaspace, ByteLevel, Whitespace,
// WhitespaceSplit, Digits and Sequence; decoders Replace, ByteFallback, Fuse, Strip,
// Metaspace, ByteLevel, BPEDecoder and Sequence. Anything else is refused at load time with
// an error naming the component and where it sits in the file.
//
// NewSynthetic builds small Gemma-style tokenizer.json files, with DiffusionGemma's special
// tokens at their real ids, for synthetic test checkpoints.
package tokenizer
