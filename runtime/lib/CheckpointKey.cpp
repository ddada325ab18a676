// CheckpointKey.cpp - what a checkpoint's training state is, and how two such descriptions differ, by name.
#include "megatrain/runtime/CheckpointKey.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

#include "megatrain/plan/DType.h"
#include "megatrain/runtime/Checksum.h"

namespace megatrain::runtime {

const StateSettingInfo kStateSettingInfo[kStateSettings] = {
    {"adamw.beta1", "beta1", "--beta1", true},
    {"adamw.beta2", "beta2", "--beta2", true},
    {"adamw.eps", "eps", "--eps", true},
    {"adamw.weight_decay", "weight decay", "--weight-decay", true},
    {"microbatches", "micro-batches", "--microbatches", false},
    {"data.batch", "token batch", "--shape", false},
    {"data.sequence", "sequence length", "--shape", false},
};

namespace {

uint64_t bitsOf(double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, 8);
  return bits;
}

std::string shapeText(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::string settingText(const StateKey& key, int s) {
  if (kStateSettingInfo[s].real) return shortestDecimal(key.real(static_cast<StateSetting>(s)));
  return std::to_string(static_cast<int64_t>(key.settings[s]));
}

const char* kindName(const StateTensorKey& tensor) { return tensor.optimizerState ? "optimizer state" : "parameter"; }

}  // namespace

std::string shortestDecimal(double value) {
  char text[40];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, value);
    if (std::strtod(text, nullptr) == value) break;
  }
  return text;
}

double StateKey::real(StateSetting s) const {
  double value;
  std::memcpy(&value, &settings[s], 8);
  return value;
}

uint64_t StateKey::hash() const {
  // One line per item; f64 settings by their bits, so the text is exact.
  std::string text = "megatrain training state\n";
  for (const StateTensorKey& tensor : tensors) {
    text += std::string(tensor.optimizerState ? "O " : "P ") + tensor.name + " " + dtypeName(tensor.dtype);
    for (int64_t d : tensor.shape) text += " " + std::to_string(d);
    text += "\n";
  }
  for (int s = 0; s < kStateSettings; ++s)
    text += std::string(kStateSettingInfo[s].entry) + " " + std::to_string(settings[s]) + "\n";
  return fnv1a64(text.data(), text.size());
}

StateKey stateKeyOf(const plan::Plan& plan) {
  StateKey key;
  for (const plan::Tensor& tensor : plan.tensors()) {
    if (tensor.role() != plan::PARAMETER && tensor.role() != plan::OPTIMIZER_STATE) continue;
    key.tensors.push_back(StateTensorKey{tensor.name(), tensor.role() == plan::OPTIMIZER_STATE, tensor.dtype(),
                                         std::vector<int64_t>(tensor.shape().begin(), tensor.shape().end())});
  }
  std::sort(key.tensors.begin(), key.tensors.end(),
            [](const StateTensorKey& a, const StateTensorKey& b) { return a.name < b.name; });
  const plan::AdamW& adamw = plan.header().optimizer();
  key.settings[kBeta1] = bitsOf(adamw.beta1());
  key.settings[kBeta2] = bitsOf(adamw.beta2());
  key.settings[kEps] = bitsOf(adamw.eps());
  key.settings[kWeightDecay] = bitsOf(adamw.weight_decay());
  key.settings[kMicrobatches] = std::max<uint32_t>(plan.header().microbatches(), 1);
  const std::string& tokenInput = plan.header().token_input();
  if (!tokenInput.empty())
    for (const plan::Tensor& tensor : plan.tensors())
      if (tensor.role() == plan::INPUT && (tensor.source() == tokenInput || tensor.name() == tokenInput) &&
          tensor.shape_size() == 2) {
        key.settings[kTokenBatch] = static_cast<uint64_t>(tensor.shape(0));
        key.settings[kTokenSequence] = static_cast<uint64_t>(tensor.shape(1));
        break;
      }
  return key;
}

std::vector<std::string> stateKeyDifferences(const StateKey& checkpoint, const StateKey& plan) {
  std::vector<std::string> items;
  std::map<std::string, const StateTensorKey*> planTensors;
  for (const StateTensorKey& tensor : plan.tensors) planTensors[tensor.name] = &tensor;
  std::map<std::string, const StateTensorKey*> saved;
  for (const StateTensorKey& tensor : checkpoint.tensors) saved[tensor.name] = &tensor;
  for (const StateTensorKey& tensor : checkpoint.tensors) {
    const auto found = planTensors.find(tensor.name);
    if (found == planTensors.end()) {
      items.push_back(std::string(kindName(tensor)) + " " + tensor.name + ": in the checkpoint, not in the plan");
      continue;
    }
    const StateTensorKey& other = *found->second;
    if (tensor == other) continue;
    if (tensor.optimizerState != other.optimizerState) {
      items.push_back(tensor.name + ": " + (tensor.optimizerState ? "an " : "a ") + kindName(tensor) +
                      " in the checkpoint, " + (other.optimizerState ? "an " : "a ") + kindName(other) + " in the plan");
    } else if (tensor.dtype != other.dtype) {
      items.push_back(std::string(kindName(tensor)) + " " + tensor.name + ": checkpoint " + dtypeName(tensor.dtype) +
                      " " + shapeText(tensor.shape) + ", plan " + dtypeName(other.dtype) + " " + shapeText(other.shape));
    } else {
      items.push_back(std::string(kindName(tensor)) + " " + tensor.name + ": checkpoint " + shapeText(tensor.shape) +
                      ", plan " + shapeText(other.shape));
    }
  }
  for (const StateTensorKey& tensor : plan.tensors)
    if (!saved.count(tensor.name))
      items.push_back(std::string(kindName(tensor)) + " " + tensor.name + ": in the plan, not in the checkpoint");
  for (int s = 0; s < kStateSettings; ++s)
    if (checkpoint.settings[s] != plan.settings[s])
      items.push_back(std::string(kStateSettingInfo[s].label) + ": checkpoint " + settingText(checkpoint, s) +
                      ", plan " + settingText(plan, s));
  return items;
}

std::string stateKeyRemedy(const StateKey& checkpoint, const StateKey& plan) {
  std::vector<std::string> flags;
  for (int s = 0; s < kTokenBatch; ++s)
    if (checkpoint.settings[s] != plan.settings[s])
      flags.push_back(std::string(kStateSettingInfo[s].flag) + " " + settingText(checkpoint, s));
  if (checkpoint.settings[kTokenBatch] != plan.settings[kTokenBatch] ||
      checkpoint.settings[kTokenSequence] != plan.settings[kTokenSequence]) {
    if (checkpoint.settings[kTokenBatch] == 0)
      flags.push_back("no token input");
    else
      flags.push_back("--shape <token input>=" + std::to_string(checkpoint.settings[kTokenBatch]) + "x" +
                      std::to_string(checkpoint.settings[kTokenSequence]));
  }
  const bool sameModel = checkpoint.tensors == plan.tensors;
  std::string remedy = "To continue from it, ";
  if (!sameModel) remedy += "compile the model it was trained from";
  if (!flags.empty()) {
    remedy += sameModel ? "recompile with " : ", with ";
    for (size_t i = 0; i < flags.size(); ++i) remedy += (i ? " " : "") + flags[i];
  }
  return remedy + " (the device budget, precision and paths may differ); to start over instead, train from " +
         "--weights into another --save directory";
}

}  // namespace megatrain::runtime
