#pragma once
// Not for users: how text/tokenizer.cc reaches the implementations. The SentencePiece one lives in
// text/sentencepiece_tokenizer.cc, which includes no Abseil header (SentencePiece's header defines
// its own absl::string_view), so this header includes none either.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer.h"

namespace tg::text::internal {

// Word and character tokenizers (text/vocab_tokenizer.cc).
bool is_vocab_tokenizer_file(std::string_view bytes);  // the first line names a word/char tokenizer
Result<std::unique_ptr<Tokenizer>> parse_vocab_tokenizer(std::string_view bytes, std::string_view source);
Result<std::unique_ptr<Tokenizer>> train_vocab_tokenizer(std::string_view kind, const std::vector<std::string>& sentences,
                                                         const TrainOptions& options);

// SentencePiece BPE and unigram (text/sentencepiece_tokenizer.cc).
Result<std::unique_ptr<Tokenizer>> parse_sentencepiece(std::string_view bytes, std::string_view source);
Result<std::unique_ptr<Tokenizer>> train_sentencepiece(std::string_view kind, const std::vector<std::string>& sentences,
                                                       const TrainOptions& options);

// WordPiece from a Hugging Face tokenizer.json (text/wordpiece_tokenizer.cc).
bool is_hf_tokenizer_json(std::string_view bytes);  // the first non-blank byte is '{'
Result<std::unique_ptr<Tokenizer>> parse_wordpiece(std::string_view bytes, std::string_view source);

// Byte-level BPE from a Hugging Face tokenizer.json (text/byte_bpe_tokenizer.cc).
// A Hugging Face tokenizer.json of either kind: a "BPE" model is read here, others by parse_wordpiece.
Result<std::unique_ptr<Tokenizer>> parse_hf_tokenizer_json(std::string_view bytes, std::string_view source);
// A byte-level BPE in GPT-2's form (ByteLevel pre-tokenizer and decoder, <|endoftext|> at id 0, the
// user symbols as added tokens, the 256 byte tokens, then the merges) learned from `texts`: at most
// options.vocab_size tokens; pairs seen fewer than options.min_count times are not merged.
Result<std::unique_ptr<Tokenizer>> train_byte_bpe(const std::vector<std::string>& texts, const TrainOptions& options);
// Its pre-tokenizer's pieces, in byte-level characters, ignoring added tokens (for the tests'
// comparison with tokenizers' pre_tokenize_str).
std::vector<std::string> byte_bpe_pre_tokenize(const Tokenizer& t, std::string_view text);

// Unicode NFC of a text (the Qwen2-style normalizer), for the tests.
std::u32string nfc_for_tests(const std::u32string& in);

// The piece that stands for a line break when keep_newlines is on: U+2424 SYMBOL FOR NEWLINE.
inline constexpr std::string_view kNewlinePiece = "\xE2\x90\xA4";

}  // namespace tg::text::internal
