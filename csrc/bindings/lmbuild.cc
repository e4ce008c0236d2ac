// Bindings for the n-gram LM builder (csrc/lmbuild/): counting, Katz estimation, pruning, and
// writing ARPA text or the binary format (straight from the trainer's values). Type conversion
// only.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bindings/convert.h"
#include "errors.h"
#include "lmbuild/arpa_writer.h"
#include "lmbuild/counts.h"
#include "lmbuild/katz.h"
#include "lmbuild/prune.h"
#include "lmbuild/to_ngram.h"
#include "ngram/binary.h"

namespace py = pybind11;

namespace dl::bindings {
namespace {

using lmbuild::BackoffModel;
using lmbuild::NgramCounter;

struct KatzModel {
  BackoffModel model;
  lmbuild::KatzStats stats;
};

// The words of n-gram `index` of order k (walking prefix links).
std::vector<std::string> CounterNgramWords(const NgramCounter& counter, int k, uint32_t index) {
  std::vector<std::string> words(k);
  for (int m = k; m >= 2; --m) {
    const lmbuild::CountTable& t = counter.table(m);
    words[m - 1] = counter.Word(t.word[index]);
    index = t.prefix[index];
  }
  words[0] = counter.Word(index);
  return words;
}

std::vector<int64_t> MinCounts(const py::object& min_counts) {
  std::vector<int64_t> out;
  if (min_counts.is_none()) return out;
  for (const auto& c : min_counts.cast<py::sequence>()) out.push_back(IntArg(c, "min_counts[i]"));
  return out;
}

lmbuild::PruneOptions PruneArgs(const py::object& threshold, const py::object& target) {
  lmbuild::PruneOptions options;
  if (!threshold.is_none()) options.threshold = RealArg(threshold, "prune_threshold");
  if (!target.is_none()) options.target = IntArg(target, "prune_to");
  return options;
}

using Metadata = std::vector<std::pair<std::string, std::string>>;

void CheckOrderArg(int k, int order) {
  if (k < 1 || k > order)
    throw InvalidArgument(Message("order must be in 1..", order, ", got ", k));
}

}  // namespace

void BindLmBuild(py::module_& m) {
  py::class_<NgramCounter>(m, "NgramCounter")
      .def(py::init([](const py::object& order) {
             return std::make_unique<NgramCounter>(IntArg<int>(order, "order"));
           }),
           py::arg("order"))
      .def_property_readonly("order", &NgramCounter::order)
      .def_property_readonly("sentences", &NgramCounter::sentences)
      .def_property_readonly("tokens", &NgramCounter::tokens)
      .def_property_readonly("vocab_size", &NgramCounter::vocab_size)
      .def("memory_bytes", &NgramCounter::memory_bytes)
      .def(
          "add_text",
          [](NgramCounter& counter, const py::bytes& text) {
            char* data = nullptr;
            Py_ssize_t size = 0;
            if (PyBytes_AsStringAndSize(text.ptr(), &data, &size) != 0)
              throw py::error_already_set();
            py::gil_scoped_release release;
            counter.AddText(std::string_view(data, static_cast<size_t>(size)));
          },
          py::arg("text"))
      .def(
          "add_token_batch",
          [](NgramCounter& counter,
             py::array_t<int32_t, py::array::c_style | py::array::forcecast> ids,
             py::array_t<int64_t, py::array::c_style | py::array::forcecast> offsets) {
            if (ids.ndim() != 1 || offsets.ndim() != 1 || offsets.shape(0) < 1) {
              throw InvalidArgument(
                  Message("add_token_batch needs 1-D ids and 1-D offsets (size >= 1), got ndim ",
                          ids.ndim(), " and ", offsets.ndim()));
            }
            // Private copies: the checks below must still hold while the GIL is released.
            const std::vector<int32_t> id_copy(ids.data(), ids.data() + ids.size());
            const std::vector<int64_t> off_copy(offsets.data(), offsets.data() + offsets.size());
            const int32_t* id = id_copy.data();
            const int64_t* off = off_copy.data();
            const int64_t n = offsets.shape(0) - 1;
            const int64_t total = ids.shape(0);
            for (int64_t s = 0; s < n; ++s) {
              if (off[s] < 0 || off[s] > off[s + 1] || off[s + 1] > total) {
                throw InvalidArgument(Message("offsets must be non-decreasing within [0, ", total,
                                              "], got ", off[s], ", ", off[s + 1]));
              }
            }
            py::gil_scoped_release release;
            for (int64_t s = 0; s < n; ++s)
              counter.AddTokens(id + off[s], static_cast<size_t>(off[s + 1] - off[s]));
          },
          py::arg("ids"), py::arg("offsets"))
      .def("num_ngrams",
           [](const NgramCounter& counter, int k) {
             CheckOrderArg(k, counter.order());
             return counter.NumNgrams(k);
           })
      .def(
          "items",
          [](const NgramCounter& counter, int k) {
            CheckOrderArg(k, counter.order());
            py::list out;
            if (k == 1) {
              for (lmbuild::WordId w = 0; w < counter.vocab_size(); ++w)
                out.append(
                    py::make_tuple(py::make_tuple(counter.Word(w)), counter.UnigramCount(w)));
            } else {
              const lmbuild::CountTable& t = counter.table(k);
              for (uint32_t i = 0; i < t.size(); ++i)
                out.append(py::make_tuple(py::tuple(py::cast(CounterNgramWords(counter, k, i))),
                                          t.count[i]));
            }
            return out;
          },
          py::arg("order"), "All n-grams of one order with their counts (for small corpora).");

  py::class_<KatzModel>(m, "KatzModel")
      .def_property_readonly("order", [](const KatzModel& k) { return k.model.order; })
      .def("counts",
           [](const KatzModel& k) {
             std::vector<uint64_t> c;
             for (int o = 1; o <= k.model.order; ++o) c.push_back(k.model.NumNgrams(o));
             return c;
           })
      .def_property_readonly("count_of_counts",
                             [](const KatzModel& k) { return k.stats.count_of_counts; })
      .def_property_readonly("discounts", [](const KatzModel& k) { return k.stats.discounts; })
      .def(
          "prune",
          [](KatzModel& k, const py::object& threshold, const py::object& target) {
            const lmbuild::PruneOptions options = PruneArgs(threshold, target);
            py::gil_scoped_release release;
            const lmbuild::PruneResult r = lmbuild::PruneRelativeEntropy(&k.model, options);
            return std::make_pair(r.theta_ln, r.removed);
          },
          py::arg("threshold") = py::none(), py::arg("target") = py::none(),
          "Relative-entropy pruning; returns (theta applied to D, n-grams removed).")
      .def(
          "write_arpa",
          [](const KatzModel& k, const std::string& path,
             const std::vector<std::pair<std::string, std::string>>& metadata,
             const py::object& digits_arg) {
            const int digits = IntArg<int>(digits_arg, "arpa_digits");
            py::gil_scoped_release release;
            lmbuild::WriteArpa(k.model, path, metadata, digits);
          },
          py::arg("path"), py::arg("metadata") = Metadata{}, py::arg("digits") = py::int_(7))
      .def(
          "write_binary",
          [](const KatzModel& k, const std::string& path, const Metadata& metadata,
             bool overwrite) {
            py::gil_scoped_release release;
            SaveBinary(*lmbuild::ToNgramLM(k.model, metadata), path, overwrite);
          },
          py::arg("path"), py::arg("metadata") = Metadata{}, py::arg("overwrite") = false,
          "The binary format (.dlm) straight from the trainer's values (lmbuild/to_ngram.h).")
      .def(
          "ngrams",
          [](const KatzModel& k, int order) {
            CheckOrderArg(order, k.model.order);
            const lmbuild::ModelLevel& level = k.model.levels[order - 1];
            std::vector<lmbuild::WordId> ids(static_cast<size_t>(order) * level.size());
            std::vector<double> prob_ln(level.size()), backoff_ln(level.size());
            for (uint32_t i = 0; i < level.size(); ++i) {
              lmbuild::NgramWordIds(k.model, order, i, &ids[static_cast<size_t>(i) * order]);
              prob_ln[i] = lmbuild::StoredProbLn(k.model, order, i);
              backoff_ln[i] = level.backoff_ln.empty() ? lmbuild::kNaN : level.backoff_ln[i];
            }
            const auto n = static_cast<py::ssize_t>(level.size());
            return py::make_tuple(ToNumpy(ids, {n, order}), ToNumpy(prob_ln, {n}),
                                  ToNumpy(backoff_ln, {n}));
          },
          py::arg("order"),
          "The n-grams of one order in the trainer's memory: (word ids [n, order], ln p [n] in "
          "double, ln alpha [n], NaN where not a context). Word ids index words().")
      .def("words", [](const KatzModel& k) { return k.model.words; });

  m.def(
      "estimate_katz",
      [](NgramCounter& counter, const py::object& min_counts) {
        auto result = std::make_unique<KatzModel>();
        lmbuild::KatzOptions options;
        options.min_counts = MinCounts(min_counts);
        {
          py::gil_scoped_release release;
          result->model = lmbuild::EstimateKatz(&counter, options, &result->stats);
        }
        return result;
      },
      py::arg("counter"), py::arg("min_counts") = py::none(),
      "Katz estimation (OpenGrm ngrammake --method=katz); consumes the counter's records.");
  m.def(
      "check_build_options",
      [](const py::object& order, const py::object& min_counts, const py::object& prune_threshold,
         const py::object& prune_to) {
        const int n = IntArg<int>(order, "order");
        NgramCounter::CheckOrder(n);
        lmbuild::KatzOptions katz;
        katz.min_counts = MinCounts(min_counts);
        lmbuild::CheckKatzOptions(katz, n);
        lmbuild::CheckPruneOptions(PruneArgs(prune_threshold, prune_to));
      },
      py::arg("order"), py::arg("min_counts"), py::arg("prune_threshold"), py::arg("prune_to"),
      "Checks LM build options before any counting (the same checks the steps make).");
}

}  // namespace dl::bindings
