// Bindings for the n-gram model: _core.NgramLM (a dl::TokenLm held by shared_ptr, so other
// binding files can take `const dl::TokenLm&`) and _core.LmState. Type conversion only.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "bindings/convert.h"
#include "errors.h"
#include "ngram/binary.h"
#include "ngram/byte_source.h"
#include "ngram/load.h"
#include "ngram/token_lm.h"

namespace py = pybind11;

namespace dl::bindings {
namespace {

// Token ids the LM accepts (InvalidArgument naming the first it rejects).
std::vector<int32_t> CheckedTokens(const TokenLm& lm, const py::handle& tokens, const char* what) {
  std::vector<int32_t> ids = TokenIds(tokens, what);
  lm.CheckTokens(ids.data(), ids.size(), what);
  return ids;
}

// A Python binary stream (an object with readinto, e.g. the bounded decompressor of
// draftlattice._compressed) read with the GIL taken for each block. An exception the stream
// raises (FormatError naming the file and the limit) propagates unchanged.
class PyStreamSource : public ByteSource {
 public:
  // Made and destroyed with the GIL held.
  explicit PyStreamSource(const py::object& stream) : readinto_(stream.attr("readinto")) {}
  size_t Read(char* out, size_t n) override {
    py::gil_scoped_acquire gil;
    const py::object got = readinto_(py::memoryview::from_memory(out, static_cast<py::ssize_t>(n)));
    const auto count = got.is_none() ? 0 : got.cast<py::ssize_t>();
    if (count < 0 || static_cast<size_t>(count) > n)
      throw InvalidArgument(Message("NgramLM source stream's readinto returned ", count,
                                    " for a buffer of ", n, " bytes"));
    return static_cast<size_t>(count);
  }

 private:
  py::object readinto_;
};

// `source`: a path (str); ARPA text in a byte buffer (bytes, bytearray) that the caller does not
// change while it is parsed; or a binary stream of ARPA text (an object with readinto).
std::shared_ptr<TokenLm> Open(const py::object& source, const std::string& name,
                              std::optional<std::vector<std::string>> vocab, const py::object& oov,
                              bool copy) {
  const auto oov_ln = static_cast<float>(RealArg(oov, "oov_logprob"));
  std::shared_ptr<NgramLM> model;
  if (py::isinstance<py::str>(source)) {
    const std::string path = source.cast<std::string>();
    py::gil_scoped_release release;
    model = LoadNgramFile(path, copy);
  } else if (py::hasattr(source, "readinto")) {
    PyStreamSource stream(source);
    py::gil_scoped_release release;
    model = LoadNgramStream(&stream, name);
  } else {
    const py::buffer_info info = source.cast<py::buffer>().request();
    if (info.ndim != 1 || info.itemsize != 1)
      throw InvalidArgument(
          "NgramLM source must be a path, a 1-D byte buffer or a binary stream of ARPA text");
    const std::string_view text(static_cast<const char*>(info.ptr), static_cast<size_t>(info.size));
    py::gil_scoped_release release;
    model = LoadNgramText(text, name);
  }
  return std::make_shared<TokenLm>(model, std::move(vocab), oov_ln);
}

std::shared_ptr<TokenLm> Remap(const TokenLm& other, std::optional<std::vector<std::string>> vocab,
                               const py::object& oov) {
  return std::make_shared<TokenLm>(other.shared_model(), std::move(vocab),
                                   static_cast<float>(RealArg(oov, "oov_logprob")));
}

py::tuple StateWords(const LmState& s) {
  py::tuple words(s.length);
  for (int i = 0; i < s.length; ++i) words[i] = s.words[i];
  return words;
}

}  // namespace

void BindNgram(py::module_& m) {
  m.attr("BINARY_FORMAT_VERSION") = kBinaryVersion;  // what NgramLM.save writes
  m.def(
      "binary_checksum",
      [](const py::buffer& data, uint64_t seed) {
        const py::buffer_info info = data.request();
        if (info.ndim != 1 || info.itemsize != 1)
          throw InvalidArgument("binary_checksum needs a 1-D byte buffer");
        py::gil_scoped_release release;
        return BinaryChecksum(info.ptr, static_cast<size_t>(info.size), seed);
      },
      py::arg("data"), py::arg("seed") = 0,
      "The binary LM format's checksum of a byte buffer (for benchmarks and tests).");
  py::class_<LmState>(m, "LmState",
                      "Scoring state: the retained history, most recent word first (LM word ids).")
      .def_property_readonly("word_ids", &StateWords)
      .def("__len__", [](const LmState& s) { return static_cast<int>(s.length); })
      .def("__eq__",
           [](const LmState& a, const py::object& b) {
             return py::isinstance<LmState>(b) && a == b.cast<const LmState&>();
           })
      .def("__hash__", [](const LmState& s) { return static_cast<py::ssize_t>(LmStateHash()(s)); })
      .def("__repr__", [](const LmState& s) {
        return "LmState(word_ids=" + py::repr(StateWords(s)).cast<std::string>() + ")";
      });

  py::class_<TokenLm, std::shared_ptr<TokenLm>>(m, "NgramLM", py::dynamic_attr())
      .def(py::init(&Open), py::arg("source"), py::arg("name"), py::arg("vocab"), py::arg("oov_ln"),
           py::arg("copy") = false)
      .def(py::init(&Remap), py::arg("other"), py::arg("vocab"), py::arg("oov_ln"),
           "The same model (shared, not copied) with another token mapping.")
      .def_property_readonly("order", &TokenLm::order)
      .def_property_readonly("counts", [](const TokenLm& lm) { return lm.ngram().counts(); })
      .def_property_readonly("vocab_size",
                             [](const TokenLm& lm) { return lm.ngram().vocab_size(); })
      .def_property_readonly("metadata", [](const TokenLm& lm) { return lm.ngram().metadata(); })
      .def_property_readonly("source_format",
                             [](const TokenLm& lm) { return lm.ngram().source_format(); })
      .def_property_readonly("oov_ln", &TokenLm::oov_ln)
      .def_property_readonly("suffix_closed",
                             [](const TokenLm& lm) { return lm.ngram().suffix_closed(); })
      .def_property_readonly("word_bounds",
                             [](const TokenLm& lm) {
                               const NgramLM& m = lm.ngram();
                               return py::array_t<float>(m.vocab_size(), m.word_bounds());
                             })
      .def_property_readonly("vocab_limit", &TokenLm::vocab_limit)
      .def_property_readonly("mapped_words", &TokenLm::mapped_words)
      .def_property_readonly("token_map_bytes", &TokenLm::map_bytes)
      .def("word",
           [](const TokenLm& lm, const py::object& index) {
             const int64_t i = IntArg(index, "word id");
             if (i < 0 || static_cast<uint64_t>(i) >= lm.ngram().vocab_size())
               throw InvalidArgument(
                   Message("word id ", i, " is outside 0..", lm.ngram().vocab_size() - 1));
             return std::string(lm.ngram().Word(static_cast<WordIndex>(i)));
           })
      .def("words",
           [](const TokenLm& lm) {
             std::vector<std::string> words;
             words.reserve(lm.ngram().vocab_size());
             for (WordIndex i = 0; i < lm.ngram().vocab_size(); ++i)
               words.emplace_back(lm.ngram().Word(i));
             return words;
           })
      .def(
          "token_scores",
          [](const TokenLm& lm, const py::object& tokens, const py::object& context, bool bos,
             bool eos) {
            const auto t = CheckedTokens(lm, tokens, "tokens");
            const auto c = CheckedTokens(lm, context, "context");
            std::vector<double> out;
            {
              py::gil_scoped_release release;
              TokenScores(lm, t.data(), t.size(), c.data(), c.size(), bos, eos, &out);
            }
            return py::array_t<double>(out.size(), out.data());
          },
          py::arg("tokens"), py::arg("context"), py::arg("bos"), py::arg("eos"))
      .def(
          "search_bounds",
          [](const TokenLm& lm, const py::object& prev, const py::object& tokens,
             const py::object& before) {
            const auto p = CheckedTokens(lm, prev, "prev");
            const auto t = CheckedTokens(lm, tokens, "tokens");
            py::array_t<float> out({p.size(), t.size()});
            if (p.empty() || t.empty()) return out;
            const int rows = static_cast<int>(p.size()), n = static_cast<int>(t.size());
            if (before.is_none()) {
              lm.BoundsAfter(p.data(), rows, t.data(), n, out.mutable_data());
            } else {  // histories whose word before prev is one of `before`
              const auto b = CheckedTokens(lm, before, "before");
              lm.BoundsAfter(b.data(), static_cast<int>(b.size()), nullptr, p.data(), rows,
                             t.data(), n, out.mutable_data(), nullptr);
            }
            return out;
          },
          "out[i, j] >= ln p(tokens[j] | h) for every history h ending in prev[i] (and, with "
          "`before`, whose word before prev[i] is one of `before`): the search's LM bounds.",
          py::arg("prev"), py::arg("tokens"), py::arg("before") = py::none())
      .def(
          "start",
          [](const TokenLm& lm, const py::object& context, bool bos) {
            const auto c = CheckedTokens(lm, context, "context");
            return lm.Start(c.data(), c.size(), bos);
          },
          py::arg("context"), py::arg("bos"))
      .def(
          "advance",
          [](const TokenLm& lm, const LmState& state, const py::object& tokens) {
            lm.CheckState(state);
            const auto t = CheckedTokens(lm, tokens, "tokens");
            return lm.Advance(state, t.data(), t.size());
          },
          py::arg("state"), py::arg("tokens"))
      .def(
          "step",
          [](const TokenLm& lm, const LmState& state, const py::object& token_obj) {
            lm.CheckState(state);
            const int32_t token = IntArg<int32_t>(token_obj, "token");
            lm.CheckTokens(&token, 1, "token");
            LmState out;
            const float score = lm.ScoreToken(state, token, &out);
            return py::make_tuple(static_cast<double>(score), out);
          },
          py::arg("state"), py::arg("token"))
      .def(
          "step_eos",
          [](const TokenLm& lm, const LmState& state) {
            lm.CheckState(state);
            LmState out;
            const float score = lm.ScoreEos(state, &out);
            return py::make_tuple(static_cast<double>(score), out);
          },
          py::arg("state"))
      .def(
          "save",
          [](const TokenLm& lm, const std::string& path, bool overwrite) {
            py::gil_scoped_release release;
            SaveBinary(lm.ngram(), path, overwrite);
          },
          py::arg("path"), py::arg("overwrite"));
}

}  // namespace dl::bindings
