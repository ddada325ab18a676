// fuzz_onnx_structure.cpp - a structure-aware libFuzzer mutator for ONNX models (docs/fuzzing.md).
//
// The target fuzz_onnx_structure is fuzz_onnx_import.cpp's test with this
// mutator linked in.
//
// Byte flips mostly break the protobuf framing, so most byte-mutated models
// never reach the importer's shape inference or folding. This mutator parses
// the input as an onnx.ModelProto, changes it as a model author or exporter
// might get it wrong (an op renamed, an input rewired or emptied, a node
// deleted, duplicated or moved before its producer, an attribute or a dim set
// to an edge value, a tensor's type or data cut short, external data pointed
// elsewhere, a function called in place of an op), and serializes it again.
// Inputs that do not parse, and one mutation in eight, go to libFuzzer's own
// byte mutator, so nothing the byte target reaches is lost. The crossover
// copies a node, a function or an initializer from one model into the other.
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "onnx/onnx.pb.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t maxSize);

namespace {

using Rng = std::minstd_rand;

// The ops the importer or the constant folder know, and a few they do not.
constexpr const char* kOps[] = {
    "Add", "Attention", "Cast", "CastLike", "Concat", "ConstantOfShape", "Cos", "CumSum", "Div",
    "Dropout", "Erf", "Exp", "Expand", "Flatten", "Gather", "GatherND", "Gelu", "Gemm",
    "Identity", "IsNaN", "LayerNormalization", "Log", "MatMul", "Max", "Min", "Mul", "Neg", "Pow",
    "RMSNormalization", "Range", "Reciprocal", "ReduceMean", "ReduceSum", "Relu", "Reshape",
    "SequenceAt", "SequenceConstruct", "SequenceLength", "Shape", "Sigmoid", "Sin", "Size",
    "Slice", "Softmax", "SoftmaxCrossEntropyLoss", "Softplus", "Split", "SplitToSequence", "Sqrt",
    "Squeeze", "Sub", "Tanh", "Tile", "Transpose", "Trilu", "Unsqueeze", "Where", "Constant",
    "Einsum", "ReduceMax", "If", "Loop", "Scan"};

// Values at the edges of what an int64 attribute, dim or offset can hold.
constexpr int64_t kEdgeInts[] = {0,  1,  -1, 2,  -2, 3,       7,        64,         255,
                                 256, 65535, 1 << 20, INT32_MAX, (int64_t{1} << 31), INT64_MAX,
                                 INT64_MIN, (int64_t{1} << 40), (int64_t{1} << 62)};
constexpr float kEdgeFloats[] = {0.0f, -0.0f, 1.0f, -1.0f, 1e-30f, 1e30f, 3.0e38f,
                                 std::numeric_limits<float>::infinity(),
                                 std::numeric_limits<float>::quiet_NaN(), 0.5f, 2.0f};
constexpr int kDataTypes[] = {0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 16, 17, 19, 23, 99};

template <typename T, size_t N>
const T& pick(Rng& rng, const T (&items)[N]) {
  return items[std::uniform_int_distribution<size_t>(0, N - 1)(rng)];
}
size_t below(Rng& rng, size_t n) { return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng); }
int64_t edgeOrSmall(Rng& rng) {
  return below(rng, 2) ? pick(rng, kEdgeInts) : static_cast<int64_t>(below(rng, 9)) - 2;
}

// Every graph the model holds: the main graph's node lists, and each
// function's, where a mutation can apply.
struct Site {
  google::protobuf::RepeatedPtrField<onnx::NodeProto>* nodes;
};
std::vector<Site> sites(onnx::ModelProto& model) {
  std::vector<Site> all{{model.mutable_graph()->mutable_node()}};
  for (onnx::FunctionProto& f : *model.mutable_functions()) all.push_back({f.mutable_node()});
  return all;
}

// Names a node input may take: graph inputs, initializers and node outputs.
std::vector<std::string> valueNames(const onnx::ModelProto& model) {
  std::vector<std::string> names;
  const onnx::GraphProto& g = model.graph();
  for (const auto& v : g.input()) names.push_back(v.name());
  for (const auto& t : g.initializer()) names.push_back(t.name());
  for (const auto& n : g.node())
    for (const auto& o : n.output()) names.push_back(o);
  for (const auto& f : model.functions()) {
    for (const auto& i : f.input()) names.push_back(i);
    for (const auto& n : f.node())
      for (const auto& o : n.output()) names.push_back(o);
  }
  return names;
}

void mutateTensor(onnx::TensorProto& t, Rng& rng) {
  switch (below(rng, 7)) {
    case 0:
      if (t.dims_size() && below(rng, 2)) t.set_dims(static_cast<int>(below(rng, t.dims_size())), edgeOrSmall(rng));
      else t.add_dims(edgeOrSmall(rng));
      break;
    case 1:
      if (t.dims_size()) t.mutable_dims()->RemoveLast();
      break;
    case 2:
      t.set_data_type(pick(rng, kDataTypes));
      break;
    case 3: {  // data cut short or grown
      std::string* raw = t.mutable_raw_data();
      if (!raw->empty() && below(rng, 2)) raw->resize(below(rng, raw->size()));
      else raw->append(below(rng, 16) + 1, static_cast<char>(below(rng, 256)));
      break;
    }
    case 4:  // raw bytes moved to a typed field, or the typed field added beside them
      if (below(rng, 2)) t.clear_raw_data();
      t.add_float_data(pick(rng, kEdgeFloats));
      t.add_int64_data(edgeOrSmall(rng));
      break;
    case 5: {  // external data: somewhere in weights.bin, or somewhere it must not be
      t.set_data_location(onnx::TensorProto::EXTERNAL);
      t.clear_external_data();
      static const char* kLocations[] = {"weights.bin", "weights.bin", "../weights.bin",
                                         "/etc/passwd", "", "missing.bin", "."};
      auto* loc = t.add_external_data();
      loc->set_key(below(rng, 8) ? "location" : "Location");
      loc->set_value(pick(rng, kLocations));
      static const char* kNumbers[] = {"0", "4", "16", "-1", "abc", "18446744073709551615",
                                       "99999999999999999999", "1e3", " 8", ""};
      if (below(rng, 2)) {
        auto* off = t.add_external_data();
        off->set_key("offset");
        off->set_value(below(rng, 2) ? pick(rng, kNumbers) : std::to_string(below(rng, 4096)));
      }
      if (below(rng, 2)) {
        auto* len = t.add_external_data();
        len->set_key("length");
        len->set_value(below(rng, 2) ? pick(rng, kNumbers) : std::to_string(below(rng, 4096)));
      }
      break;
    }
    default:
      t.set_data_location(onnx::TensorProto::DEFAULT);
      t.clear_external_data();
      break;
  }
}

void mutateAttribute(onnx::AttributeProto& a, Rng& rng) {
  switch (below(rng, 6)) {
    case 0:
      a.set_i(edgeOrSmall(rng));
      if (below(rng, 4) == 0) a.set_type(onnx::AttributeProto::INT);
      break;
    case 1:
      if (a.ints_size() && below(rng, 2)) a.set_ints(static_cast<int>(below(rng, a.ints_size())), edgeOrSmall(rng));
      else a.add_ints(edgeOrSmall(rng));
      break;
    case 2:
      a.set_f(pick(rng, kEdgeFloats));
      break;
    case 3:
      a.set_type(static_cast<onnx::AttributeProto::AttributeType>(below(rng, 15)));
      break;
    case 4:
      if (a.has_t()) mutateTensor(*a.mutable_t(), rng);
      else mutateTensor(*a.mutable_t(), rng), a.set_type(onnx::AttributeProto::TENSOR);
      break;
    default:
      if (a.ints_size()) a.mutable_ints()->RemoveLast();
      else a.set_s(below(rng, 2) ? "" : "NOTSET");
      break;
  }
}

void mutateNode(onnx::ModelProto& model, onnx::NodeProto& n, Rng& rng) {
  std::vector<std::string> names = valueNames(model);
  switch (below(rng, 9)) {
    case 0:  // another op, or a model-local function, in its place
      if (model.functions_size() && below(rng, 3) == 0) {
        const onnx::FunctionProto& f = model.functions(static_cast<int>(below(rng, model.functions_size())));
        n.set_op_type(f.name());
        n.set_domain(f.domain());
      } else {
        n.set_op_type(pick(rng, kOps));
        if (below(rng, 4) == 0) n.set_domain(below(rng, 2) ? "com.microsoft" : "");
      }
      break;
    case 1:  // an input rewired to another value, or left empty
      if (n.input_size()) {
        const int i = static_cast<int>(below(rng, n.input_size()));
        n.set_input(i, below(rng, 4) == 0 || names.empty() ? std::string() : names[below(rng, names.size())]);
      }
      break;
    case 2:
      if (n.input_size() && below(rng, 2)) n.mutable_input()->RemoveLast();
      else n.add_input(names.empty() || below(rng, 4) == 0 ? std::string() : names[below(rng, names.size())]);
      break;
    case 3:  // an output renamed to a name that already exists, or dropped
      if (n.output_size() && !names.empty() && below(rng, 2))
        n.set_output(static_cast<int>(below(rng, n.output_size())), names[below(rng, names.size())]);
      else if (n.output_size() > 1 || (n.output_size() == 1 && below(rng, 4) == 0))
        n.mutable_output()->RemoveLast();
      else n.add_output(n.name() + "_extra");
      break;
    case 4:
    case 5:
    case 6:
      if (n.attribute_size()) {
        mutateAttribute(*n.mutable_attribute(static_cast<int>(below(rng, n.attribute_size()))), rng);
        break;
      }
      [[fallthrough]];
    case 7: {  // an attribute added: one of a neighbour's, or a common name
      static const char* kNames[] = {"axis", "axes", "perm", "keepdims", "to", "transA", "transB",
                                     "epsilon", "upper", "exclusive", "reverse", "value",
                                     "start", "end", "stash_type", "is_causal", "q_num_heads"};
      onnx::AttributeProto* a = n.add_attribute();
      a->set_name(pick(rng, kNames));
      a->set_type(below(rng, 2) ? onnx::AttributeProto::INT : onnx::AttributeProto::INTS);
      mutateAttribute(*a, rng);
      break;
    }
    default:
      if (n.attribute_size()) n.mutable_attribute()->RemoveLast();
      break;
  }
}

void mutateValueInfo(onnx::ValueInfoProto& v, Rng& rng) {
  onnx::TypeProto_Tensor* t = v.mutable_type()->mutable_tensor_type();
  switch (below(rng, 4)) {
    case 0:
      t->set_elem_type(pick(rng, kDataTypes));
      break;
    case 1: {
      onnx::TensorShapeProto* s = t->mutable_shape();
      if (s->dim_size() && below(rng, 2)) {
        auto* d = s->mutable_dim(static_cast<int>(below(rng, s->dim_size())));
        if (below(rng, 3) == 0) d->set_dim_param(below(rng, 2) ? "batch" : "");
        else d->set_dim_value(edgeOrSmall(rng));
      } else {
        s->add_dim()->set_dim_value(edgeOrSmall(rng));
      }
      break;
    }
    case 2:
      if (t->shape().dim_size()) t->mutable_shape()->mutable_dim()->RemoveLast();
      else t->clear_shape();
      break;
    default:
      v.set_name(v.name() + (below(rng, 2) ? "" : "_renamed"));
      t->clear_shape();
      break;
  }
}

// One structural change somewhere in the model.
void mutateModel(onnx::ModelProto& model, Rng& rng) {
  onnx::GraphProto& g = *model.mutable_graph();
  std::vector<Site> all = sites(model);
  Site site = all[below(rng, all.size())];
  auto& nodes = *site.nodes;
  switch (below(rng, 10)) {
    case 0:
    case 1:
    case 2:
      if (nodes.size()) {
        mutateNode(model, *nodes.Mutable(static_cast<int>(below(rng, nodes.size()))), rng);
        return;
      }
      break;
    case 3:  // a node deleted
      if (nodes.size()) {
        nodes.DeleteSubrange(static_cast<int>(below(rng, nodes.size())), 1);
        return;
      }
      break;
    case 4:  // a node duplicated, or moved ahead of the nodes before it
      if (nodes.size()) {
        const int from = static_cast<int>(below(rng, nodes.size()));
        if (below(rng, 2)) *nodes.Add() = nodes.Get(from);
        const int to = static_cast<int>(below(rng, nodes.size()));
        for (int i = below(rng, 2) ? from : nodes.size() - 1; i > to; --i) nodes.SwapElements(i, i - 1);
        return;
      }
      break;
    case 5:
      if (g.initializer_size()) {
        mutateTensor(*g.mutable_initializer(static_cast<int>(below(rng, g.initializer_size()))), rng);
        return;
      }
      break;
    case 6:
      if (g.input_size()) {
        mutateValueInfo(*g.mutable_input(static_cast<int>(below(rng, g.input_size()))), rng);
        return;
      }
      break;
    case 7:
      if (g.output_size()) {
        if (below(rng, 3) == 0) g.mutable_output()->RemoveLast();
        else mutateValueInfo(*g.mutable_output(static_cast<int>(below(rng, g.output_size()))), rng);
        return;
      }
      break;
    case 8:  // opsets
      if (model.opset_import_size()) {
        model.mutable_opset_import(static_cast<int>(below(rng, model.opset_import_size())))
            ->set_version(edgeOrSmall(rng));
      } else {
        auto* op = model.add_opset_import();
        op->set_domain("");
        op->set_version(17);
      }
      return;
    default:
      break;
  }
  // Nothing of the chosen kind: change a node if any, else add one.
  if (g.node_size()) mutateNode(model, *g.mutable_node(static_cast<int>(below(rng, g.node_size()))), rng);
  else {
    onnx::NodeProto* n = g.add_node();
    n->set_op_type(pick(rng, kOps));
    n->add_input(g.input_size() ? g.input(0).name() : "x");
    n->add_output("y");
  }
}

size_t writeOut(const onnx::ModelProto& model, uint8_t* data, size_t size, size_t maxSize) {
  std::string bytes;
  if (!model.SerializeToString(&bytes) || bytes.size() > maxSize) return LLVMFuzzerMutate(data, size, maxSize);
  std::memcpy(data, bytes.data(), bytes.size());
  return bytes.size();
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t maxSize, unsigned int seed) {
  Rng rng(seed);
  onnx::ModelProto model;
  if (below(rng, 8) == 0 || !model.ParseFromArray(data, static_cast<int>(size)))
    return LLVMFuzzerMutate(data, size, maxSize);
  const size_t rounds = 1 + below(rng, 3);
  for (size_t i = 0; i < rounds; ++i) mutateModel(model, rng);
  return writeOut(model, data, size, maxSize);
}

extern "C" size_t LLVMFuzzerCustomCrossOver(const uint8_t* data1, size_t size1, const uint8_t* data2,
                                            size_t size2, uint8_t* out, size_t maxOutSize,
                                            unsigned int seed) {
  Rng rng(seed);
  onnx::ModelProto a, b;
  if (!a.ParseFromArray(data1, static_cast<int>(size1)) || !b.ParseFromArray(data2, static_cast<int>(size2)))
    return 0;  // libFuzzer then keeps its other mutations
  switch (below(rng, 3)) {
    case 0:
      if (b.graph().node_size()) {
        auto& nodes = *a.mutable_graph()->mutable_node();
        *nodes.Add() = b.graph().node(static_cast<int>(below(rng, b.graph().node_size())));
        for (int i = nodes.size() - 1, to = static_cast<int>(below(rng, nodes.size())); i > to; --i)
          nodes.SwapElements(i, i - 1);
      }
      break;
    case 1:
      if (b.functions_size()) *a.add_functions() = b.functions(static_cast<int>(below(rng, b.functions_size())));
      break;
    default:
      if (b.graph().initializer_size())
        *a.mutable_graph()->add_initializer() =
            b.graph().initializer(static_cast<int>(below(rng, b.graph().initializer_size())));
      break;
  }
  std::string bytes;
  if (!a.SerializeToString(&bytes) || bytes.size() > maxOutSize) return 0;
  std::memcpy(out, bytes.data(), bytes.size());
  return bytes.size();
}
