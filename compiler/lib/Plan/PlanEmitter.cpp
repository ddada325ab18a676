//===- PlanEmitter.cpp - a planned mt module to a megatrain plan ----------===//
//
// The last stage of the compiler: the function's ops, in mt.step order, become
// the plan's steps; its values become tensors at the offsets mt-plan-memory
// chose. Nothing is decided here that a pass could decide: emission only
// translates, and checks that what it translates is consistent.
//
//   mt.param      PARAMETER (host master, once per name) + `copy` on h2d into a
//                 PARAMETER_COPY `dev:<name>` in the arena, once per op. A
//                 bf16 mt.param with mt.master_element = f32 (mt-precision)
//                 has an f32 master and a host bf16 PARAMETER_COMPUTE
//                 `compute:<name>` (once per name) that the copy reads; the
//                 parameter's ADAMW rewrites it (5th tensor); the plan is
//                 then format minor 3. A device home (mt.home = "device")
//                 has its master in device_state and no compute copy: a
//                 bf16 fetch is a `cast` kernel from the master into
//                 `dev:<name>`; a fetch in the master's type is no step at
//                 all (the kernels read the master in place) unless one of
//                 its reads comes after the parameter's mt.adamw, and then
//                 a `copy` on compute
//   mt.input      INPUT in the arena, no step (the runtime writes it)
//   mt.constant   CONSTANT in the arena with its bytes, no step, never dies
//   mt.output x   `copy` d2h of x into the host OUTPUT_READOUT `output:<name>`
//                 (the plan is then format minor 1)
//   mt.param_grad nothing (mt-adamw consumes it; one left over has no effect)
//   mt.offload x  `copy` d2h of x into an OFFLOADED `offload:<x>` in the host
//                 staging pool (pool 2, at mt.offset); the plan is minor 2
//   mt.prefetch h `copy` h2d of h into an ACTIVATION `prefetch:<x>`
//   mt.recompute  on a kernel op: the step's `recompute` flag
//   mt.alias      on a reshape or transpose (mt-view-aliases): no step; the
//                 result is an ACTIVATION `view:<base>` with `alias_of` its
//                 base's tensor and its base's bytes, and the base's
//                 last_use_step covers the view's (format minor 8)
//   other mt ops  `kernel` on compute, results ACTIVATION `%<step>.<i>:<kernel>`
//   mt.loss, mt.adamw, mt.grad_part: the host side of the step, emitted by
//                 HostTaskEmitter.cpp (PlanBuilder.h declares the builder
//                 both files share)
//   mt.evaluation on the function (mt-add-loss forward-only): header
//                 `evaluation` (format minor 6); no gradients or updates
//
// Op steps (mt.step) and plan steps differ because one op can become several
// steps; last_use_step is in plan steps. Last, emitPlan runs insertEvents
// (Events.h): it adds the record/wait steps between streams and renumbers the
// steps (activation names keep the numbers given here).
//
//===----------------------------------------------------------------------===//
#include "megatrain/Plan/PlanEmitter.h"

#include "PlanBuilder.h"
#include "megatrain/Plan/Events.h"
#include "megatrain/plan/DType.h"
#include "megatrain/plan/FormatVersion.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <algorithm>

namespace megatrain::emission {

namespace {

constexpr uint32_t kDevicePool = 0;
constexpr uint32_t kHostPool = 1;
constexpr uint32_t kHostStagePool = 2;
constexpr uint64_t kHostAlignment = 256;

mlir::FailureOr<pb::DType> dtypeOf(mlir::Operation *op, mlir::Type element) {
  if (element.isF32())
    return pb::F32;
  if (element.isF64())
    return pb::F64;
  if (element.isBF16())
    return pb::BF16;
  if (element.isF16())
    return pb::F16;
  if (element.isInteger(64))
    return pb::I64;
  if (element.isInteger(32))
    return pb::I32;
  if (element.isInteger(1))
    return pb::BOOL;
  if (element.isUnsignedInteger(8))
    return pb::U8;
  return op->emitError("the plan has no dtype for element type ") << element;
}


/// The type of a parameter's host master: the mt.param's own, or for a
/// compute-type fetch its shape with mt.master_element (mt-precision).
mlir::Type masterTypeOf(mt::ParamOp param) {
  auto element = param->getAttrOfType<mlir::TypeAttr>(mt::attr::kMasterElement);
  if (!element)
    return param.getType();
  return mlir::cast<mlir::RankedTensorType>(param.getType()).clone(element.getValue());
}


} // namespace

mlir::FailureOr<uint32_t> PlanBuilder::addTensor(mlir::Operation *op,
                                                 const std::string &name,
                                                 mlir::Type type, pb::Role role) {
  auto tensor = mlir::dyn_cast<mlir::RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return op->emitError("the plan needs statically shaped tensors, got ") << type;
  mlir::FailureOr<pb::DType> dtype = dtypeOf(op, tensor.getElementType());
  if (mlir::failed(dtype))
    return mlir::failure();

  std::string unique = name;
  for (int suffix = 2; !names.insert(unique).second; ++suffix)
    unique = name + "#" + std::to_string(suffix);

  uint32_t id = plan.tensors_size();
  pb::Tensor *entry = plan.add_tensors();
  entry->set_id(id);
  entry->set_name(unique);
  uint64_t bytes = dtypeSize(*dtype);
  for (int64_t dim : tensor.getShape()) {
    entry->add_shape(dim);
    bytes *= static_cast<uint64_t>(dim);
  }
  entry->set_dtype(*dtype);
  entry->set_role(role);
  entry->mutable_buffer()->set_size_bytes(bytes);
  entry->set_last_use_step(-1);
  return id;
}

bool PlanBuilder::onDevice(const std::string &param) const {
  auto it = homes.find(param);
  return it != homes.end() && it->second == "device";
}

bool PlanBuilder::onDisk(const std::string &param) const {
  auto it = homes.find(param);
  return it != homes.end() && it->second == "disk";
}

bool PlanBuilder::accumulatesOnDevice(const std::string &param) const {
  return onDevice(param) || deviceAccumulators.contains(param);
}

void PlanBuilder::placeState(const std::string &param, uint32_t id) {
  if (!onDevice(param))
    return placeOnHost(id);
  placeOnDeviceState(id);
}

void PlanBuilder::placeOnDeviceState(uint32_t id) {
  pb::Buffer *buffer = plan.mutable_tensors(id)->mutable_buffer();
  buffer->set_pool(statePool);
  buffer->set_offset(stateTop);
  uint64_t padded = (buffer->size_bytes() + kHostAlignment - 1) / kHostAlignment *
                    kHostAlignment;
  stateTop += std::max<uint64_t>(padded, kHostAlignment);
}

bool PlanBuilder::readsPrecedeUpdate(mt::ParamOp param) const {
  auto update = updateSteps.find(param.getName().str());
  if (update == updateSteps.end())
    return true; // frozen: never rewritten
  for (mlir::Operation *user : param->getUsers()) {
    auto step = user->getAttrOfType<mlir::IntegerAttr>(mt::attr::kStep);
    if (!step || step.getInt() >= update->second)
      return false;
  }
  return true;
}

void PlanBuilder::placeOnHost(uint32_t id) {
  pb::Buffer *buffer = plan.mutable_tensors(id)->mutable_buffer();
  buffer->set_pool(kHostPool);
  buffer->set_offset(hostTop);
  uint64_t padded = (buffer->size_bytes() + kHostAlignment - 1) / kHostAlignment *
                    kHostAlignment;
  hostTop += std::max<uint64_t>(padded, kHostAlignment);
}

mlir::LogicalResult PlanBuilder::placeInArena(mlir::Operation *op,
                                              unsigned result, uint32_t id,
                                              int64_t opStep,
                                              int64_t defPlanStep) {
  auto offsets = op->getAttrOfType<mlir::DenseI64ArrayAttr>(mt::attr::kOffset);
  if (!offsets || offsets.size() != static_cast<int64_t>(op->getNumResults()))
    return op->emitError("op has no mt.offset for each result; run "
                         "mt-plan-memory before emitting a plan");
  pb::Buffer *buffer = plan.mutable_tensors(id)->mutable_buffer();
  int64_t offset = offsets[result];
  // mt.offload results live in the host staging pool (mt-plan-memory).
  bool staged = mlir::isa<mt::OffloadOp>(op);
  uint64_t limit = staged ? stageSize : arenaSize;
  if (offset < 0 || static_cast<uint64_t>(offset) + buffer->size_bytes() > limit)
    return op->emitError("mt.offset ")
           << offset << " puts result " << result << " outside the "
           << (staged ? "host staging pool" : "arena") << " of " << limit << " bytes";
  buffer->set_pool(staged ? kHostStagePool : kDevicePool);
  buffer->set_offset(static_cast<uint64_t>(offset));
  valueTensors[op->getResult(result)] = id;
  arenaIndex[id] = arena.size();
  arena.push_back(ArenaTensor{id, op, result, opStep, defPlanStep, false, {}});
  return mlir::success();
}

pb::Step &PlanBuilder::addStep(const char *stream, mlir::Operation *op,
                               int64_t opStep) {
  pb::Step *step = plan.add_steps();
  step->set_index(plan.steps_size() - 1);
  step->set_stream(stream);
  step->set_source_op(formatLocation(op->getLoc()));
  planStepOpStep.push_back(opStep);
  return *step;
}

void PlanBuilder::noteRead(uint32_t id) {
  auto it = arenaIndex.find(id);
  if (it != arenaIndex.end())
    arena[it->second].reads.push_back(plan.steps_size() - 1);
}

mlir::FailureOr<uint32_t> PlanBuilder::tensorOf(mlir::Operation *user,
                                                mlir::Value value) {
  auto it = valueTensors.find(value);
  if (it == valueTensors.end())
    return user->emitError("operand is not defined by an earlier mt op of the "
                           "step (stale mt.step order?)");
  return it->second;
}

mlir::LogicalResult
PlanBuilder::addParameterMasters(llvm::ArrayRef<mlir::Operation *> ops) {
  // Masters come first in the tensor table and the host pool, one per
  // initializer name even when several mt.param ops read it; then the
  // compute copies of the names fetched in another type (mt-precision).
  std::map<std::string, mt::ParamOp> seen;
  std::vector<mt::ParamOp> computeFetches;
  for (mlir::Operation *op : ops) {
    auto param = mlir::dyn_cast<mt::ParamOp>(op);
    if (!param)
      continue;
    std::string name = param.getName().str();
    mlir::Type masterType = masterTypeOf(param);
    if (masterType != param.getType())
      computeFetches.push_back(param);
    // The state's home (mt-homes; absent: host).
    std::string home = "host";
    if (auto attr = param->getAttrOfType<mlir::StringAttr>(mt::attr::kHome))
      home = attr.str();
    if (home != "host" && home != "device" && home != "disk")
      return param.emitError("mt.param '")
             << name << "' has mt.home = \"" << home << "\" (device, host or disk)";
    if (home == "disk" && !param.getTrainable())
      return param.emitError("mt.param '")
             << name << "' is frozen but has mt.home = \"disk\"; only optimizer state goes to disk";
    if (auto accumulate = param->getAttrOfType<mlir::StringAttr>(mt::attr::kAccumulate)) {
      const bool visit = accumulate.getValue() == "visit";
      if ((accumulate.getValue() != "device" && !visit) || home == "device" ||
          !param.getTrainable())
        return param.emitError("mt.param '")
               << name << "' has mt.accumulate = \"" << accumulate.getValue()
               << "\"; only a trainable host or disk home accumulates on the \"device\" or "
                  "visits it (\"visit\")";
      if (visit && visitRing.size == 0)
        return param.emitError("mt.param '")
               << name << "' has mt.accumulate = \"visit\" but the function has no "
                          "mt.visit_ring_size";
      (visit ? visitingAccumulators : deviceAccumulators).insert(name);
    }
    if (auto update = param->getAttrOfType<mlir::StringAttr>(mt::attr::kUpdate)) {
      if (update.getValue() != "visit" || home != "host" || !param.getTrainable())
        return param.emitError("mt.param '")
               << name << "' has mt.update = \"" << update.getValue()
               << "\"; only a trainable host home's update visits the device (\"visit\")";
      if (updateRing.size == 0)
        return param.emitError("mt.param '")
               << name << "' has mt.update = \"visit\" but the function has no "
                          "mt.update_ring_size";
      updateVisitors.insert(name);
      if (auto moments = param->getAttrOfType<mlir::StringAttr>(mt::attr::kMoments)) {
        if (moments.getValue() != "device")
          return param.emitError("mt.param '")
                 << name << "' has mt.moments = \"" << moments.getValue()
                 << "\"; a visiting update keeps its moments on the \"device\" or with its home";
        deviceMoments.insert(name);
      }
    }
    auto [previousHome, firstHome] = homes.emplace(name, home);
    if (!firstHome && previousHome->second != home)
      return param.emitError("mt.param '")
             << name << "' has mt.home \"" << home << "\", another fetch of it \""
             << previousHome->second << "\"";
    auto [it, inserted] = seen.emplace(name, param);
    if (!inserted) {
      if (masterTypeOf(it->second) != masterType ||
          it->second.getTrainable() != param.getTrainable())
        return param.emitError("mt.param '")
               << name << "' disagrees in type or trainability with another "
                  "mt.param of the same name";
      continue;
    }
    mlir::FailureOr<uint32_t> id =
        addTensor(op, name, masterType, pb::PARAMETER);
    if (mlir::failed(id))
      return mlir::failure();
    pb::Tensor *tensor = plan.mutable_tensors(*id);
    tensor->set_source(name);
    tensor->set_trainable(param.getTrainable());
    placeState(name, *id);
    parameterMasters[name] = *id;
  }
  for (mt::ParamOp param : computeFetches) {
    std::string name = param.getName().str();
    auto type = mlir::cast<mlir::RankedTensorType>(param.getType());
    mlir::Type master = mlir::getElementTypeOrSelf(masterTypeOf(param));
    if (!type.getElementType().isBF16() || !master.isF32())
      return param.emitError("mt.param '")
             << name << "' fetches " << type.getElementType() << " from an "
             << master << " master; the plan has bf16 compute copies of f32 "
                          "masters only";
    // A device home keeps no compute copy: its fetch casts the master.
    if (computeCopies.count(name) || onDevice(name))
      continue;
    mlir::FailureOr<uint32_t> id =
        addTensor(param, "compute:" + name, type, pb::PARAMETER_COMPUTE);
    if (mlir::failed(id))
      return mlir::failure();
    plan.mutable_tensors(*id)->set_source(name);
    placeState(name, *id);
    computeCopies[name] = *id;
  }
  return mlir::success();
}

mlir::LogicalResult PlanBuilder::emitKernel(mlir::Operation *op, int64_t opStep) {
  if (op->getDialect() == nullptr ||
      op->getDialect()->getNamespace() != mt::MtDialect::getDialectNamespace())
    return op->emitError("cannot emit '") << op->getName() << "' into a plan";
  if (auto product = productParts.find(op); product != productParts.end())
    return emitProductPart(mlir::cast<mt::MatMulOp>(op), product->second.first,
                           product->second.second, opStep);
  std::string kernelName = op->getName().stripDialect().str();

  pb::Step &step = addStep(kCompute, op, opStep);
  int64_t planStep = step.index();
  if (op->hasAttr(mt::attr::kRecompute))
    step.set_recompute(true);
  pb::Kernel *kernel = step.mutable_kernel();
  kernel->set_kernel(kernelName);
  if (mlir::failed(addKernelInputs(op, *kernel)))
    return mlir::failure();
  for (unsigned i = 0; i < op->getNumResults(); ++i) {
    std::string name = "%" + std::to_string(planStep) + "." + std::to_string(i) +
                       ":" + kernelName;
    mlir::FailureOr<uint32_t> id =
        addTensor(op, name, op->getResult(i).getType(), pb::ACTIVATION);
    if (mlir::failed(id) || mlir::failed(placeInArena(op, i, *id, opStep, planStep)))
      return mlir::failure();
    kernel->add_outputs(*id);
  }
  return addKernelAttributes(op, *kernel);
}

mlir::LogicalResult PlanBuilder::addKernelInputs(mlir::Operation *op, pb::Kernel &kernel) {
  for (mlir::Value operand : op->getOperands()) {
    mlir::FailureOr<uint32_t> id = tensorOf(op, operand);
    if (mlir::failed(id))
      return mlir::failure();
    kernel.add_inputs(*id);
    noteRead(*id);
  }
  return mlir::success();
}

mlir::LogicalResult PlanBuilder::addKernelAttributes(mlir::Operation *op, pb::Kernel &kernelRef) {
  pb::Kernel *kernel = &kernelRef;
  // Kernel parameters are the op's inherent attributes (docs/ops.md).
  std::optional<mlir::RegisteredOperationName> info = op->getRegisteredInfo();
  if (!info)
    return op->emitError("cannot emit unregistered op '") << op->getName() << "'";
  for (mlir::StringAttr attrName : info->getAttributeNames()) {
    std::optional<mlir::Attribute> value = op->getInherentAttr(attrName);
    if (!value || !*value) {
      // An elided default-valued flag: matmul's transposes default to false.
      if (mlir::isa<mt::MatMulOp, mt::MatMulAddOp>(op)) {
        pb::Attribute *attr = kernel->add_attributes();
        attr->set_name(attrName.str());
        attr->set_i(0);
      }
      continue;
    }
    // The [B, H, S, D] layout (bshd 0, mt-fold-head-transposes) is the
    // kernels' default: left out, so plans without the pass do not change.
    if (attrName.getValue() == "bshd" && mlir::isa<mlir::IntegerAttr>(*value) &&
        !mlir::cast<mlir::IntegerAttr>(*value).getValue().getBoolValue())
      continue;
    pb::Attribute *attr = kernel->add_attributes();
    attr->set_name(attrName.str());
    if (auto flag = mlir::dyn_cast<mlir::BoolAttr>(*value)) {
      attr->set_i(flag.getValue() ? 1 : 0);
    } else if (auto integer = mlir::dyn_cast<mlir::IntegerAttr>(*value)) {
      attr->set_i(integer.getInt());
    } else if (auto real = mlir::dyn_cast<mlir::FloatAttr>(*value)) {
      attr->set_f(real.getValueAsDouble());
    } else if (auto text = mlir::dyn_cast<mlir::StringAttr>(*value)) {
      attr->set_s(text.str());
    } else if (auto ints = mlir::dyn_cast<mlir::DenseI64ArrayAttr>(*value)) {
      // Set even when empty (a rank-0 slice's starts): the kind must survive.
      pb::IntList *list = attr->mutable_ints();
      for (int64_t v : ints.asArrayRef())
        list->add_values(v);
    } else if (auto reals = mlir::dyn_cast<mlir::DenseF64ArrayAttr>(*value)) {
      pb::FloatList *list = attr->mutable_floats();
      for (double v : reals.asArrayRef())
        list->add_values(v);
    } else {
      return op->emitError("attribute '")
             << attrName.getValue() << "' has no plan encoding: " << *value;
    }
  }
  // The compute precision mt-precision put on matmul and attention steps
  // (a discardable attribute).
  if (auto precision = op->getAttrOfType<mlir::StringAttr>("precision")) {
    pb::Attribute *attr = kernel->add_attributes();
    attr->set_name("precision");
    attr->set_s(precision.str());
  }
  return mlir::success();
}

void PlanBuilder::findProductParts(llvm::ArrayRef<mlir::Operation *> ops) {
  if (!options.accumulateInProducts || !func->hasAttr(kMicrobatchesAttr))
    return;
  // The part a sink takes: its index for an mt.grad_part, the count of
  // earlier parts for the mt.adamw of an accumulated parameter (the last part).
  std::map<std::string, int64_t> parts;
  for (mlir::Operation *op : ops) {
    std::string param;
    mlir::Value grad;
    int64_t index = 0;
    if (auto part = mlir::dyn_cast<mt::GradPartOp>(op)) {
      param = part.getParam().str();
      grad = part.getGrad();
      index = static_cast<int64_t>(part.getIndex());
      ++parts[param];
    } else if (auto update = mlir::dyn_cast<mt::AdamWOp>(op)) {
      param = update.getParam().str();
      grad = update.getGrad();
      auto earlier = parts.find(param);
      if (earlier == parts.end())
        continue; // not accumulated
      index = earlier->second;
    } else {
      continue;
    }
    // The product's own result, read by nothing else, in the accumulator's
    // type (gradientOf checks it against the master), and run once: a
    // recomputed product would add its part twice.
    auto product = grad.getDefiningOp<mt::MatMulOp>();
    if (!product || !(accumulatesOnDevice(param) || visits(param)) || !grad.hasOneUse() ||
        product->hasAttr(mt::attr::kRecompute) || product->hasAttr(mt::attr::kAlias) ||
        !mlir::getElementTypeOrSelf(grad.getType()).isF32())
      continue;
    productParts[product] = {param, index};
    fusedSinks.insert(op);
    if (mlir::isa<mt::AdamWOp>(op))
      lastProductParts[param] = product;
  }
}

mlir::LogicalResult PlanBuilder::emitProductPart(mt::MatMulOp op, const std::string &param,
                                                 int64_t index, int64_t opStep) {
  // The sum the product writes into: the accumulator's visit to the device
  // (VisitEmitter.cpp), or the device accumulator, made by part 0.
  const bool visit = visits(param);
  if (!visit && index == 0) {
    mlir::FailureOr<uint32_t> tensor =
        addTensor(op, "grad:" + param, op.getResult().getType(), pb::GRADIENT);
    if (mlir::failed(tensor))
      return mlir::failure();
    placeOnDeviceState(*tensor);
    hostGradients[param] = *tensor;
  }
  mlir::FailureOr<uint32_t> sum = deviceSumOf(op, param);
  if (mlir::failed(sum))
    return mlir::failure();
  const uint32_t accumulator = *sum;
  pb::Step &step = addStep(kCompute, op, opStep);
  pb::Kernel *kernel = step.mutable_kernel();
  // Part 0 is the product; part k >= 1 adds it to the sum so far in the
  // epilogue (fl(fl(A B) + acc), the bits of matmul then ACCUMULATE).
  kernel->set_kernel(index == 0 ? "matmul" : "matmul_add");
  if (mlir::failed(addKernelInputs(op, *kernel)))
    return mlir::failure();
  if (index > 0) {
    kernel->add_inputs(accumulator);
    requirePlanFormatMinor(*plan.mutable_header(), kPlanMinorHomes);
  }
  kernel->add_outputs(accumulator);
  valueTensors[op.getResult()] = accumulator;
  if (mlir::failed(addKernelAttributes(op, *kernel)))
    return mlir::failure();
  // A visit goes back to its host accumulator, unless it is the last part
  // of an update that visits the device too: that update reads it in place.
  auto last = lastProductParts.find(param);
  const bool readInPlace =
      visitsForUpdate(param) && last != lastProductParts.end() && last->second == op;
  if (visit && !readInPlace)
    emitVisitReturn(op, param, accumulator, opStep);
  return mlir::success();
}


mlir::LogicalResult PlanBuilder::emitOutput(mt::OutputOp op, int64_t opStep) {
  std::string name = "output:" + op.getName().str();
  if (names.contains(name))
    return op.emitError("output '") << op.getName() << "' is kept twice";
  mlir::FailureOr<uint32_t> value = tensorOf(op, op.getValue());
  if (mlir::failed(value))
    return mlir::failure();
  mlir::FailureOr<uint32_t> readout =
      addTensor(op, name, op.getValue().getType(), pb::OUTPUT_READOUT);
  if (mlir::failed(readout))
    return mlir::failure();
  placeOnHost(*readout);
  // Older runtimes do not know the role; the minor makes them refuse the plan.
  requirePlanFormatMinor(*plan.mutable_header(), kPlanMinorOutputReadout);

  pb::Step &copy = addStep(kDeviceToHost, op, opStep);
  copy.mutable_copy()->set_src(*value);
  copy.mutable_copy()->set_dst(*readout);
  noteRead(*value);
  return mlir::success();
}


mlir::LogicalResult PlanBuilder::emitOffload(mt::OffloadOp op, int64_t opStep) {
  mlir::FailureOr<uint32_t> source = tensorOf(op, op.getValue());
  if (mlir::failed(source))
    return mlir::failure();
  mlir::FailureOr<uint32_t> host =
      addTensor(op, "offload:" + plan.tensors(*source).name(), op.getType(), pb::OFFLOADED);
  if (mlir::failed(host))
    return mlir::failure();
  pb::Step &copy = addStep(kDeviceToHost, op, opStep);
  copy.mutable_copy()->set_src(*source);
  copy.mutable_copy()->set_dst(*host);
  noteRead(*source);
  // The plan uses role OFFLOADED and the staging pool.
  requirePlanFormatMinor(*plan.mutable_header(), kPlanMinorTiering);
  return placeInArena(op, 0, *host, opStep, copy.index());
}

mlir::LogicalResult PlanBuilder::emitPrefetch(mt::PrefetchOp op, int64_t opStep) {
  mlir::FailureOr<uint32_t> host = tensorOf(op, op.getHost());
  if (mlir::failed(host))
    return mlir::failure();
  std::string name = plan.tensors(*host).name();
  name = "prefetch:" + name.substr(name.find(':') + 1);
  mlir::FailureOr<uint32_t> device = addTensor(op, name, op.getType(), pb::ACTIVATION);
  if (mlir::failed(device))
    return mlir::failure();
  pb::Step &copy = addStep(kHostToDevice, op, opStep);
  copy.mutable_copy()->set_src(*host);
  copy.mutable_copy()->set_dst(*device);
  noteRead(*host);
  return placeInArena(op, 0, *device, opStep, copy.index());
}

namespace {

/// Little-endian bytes of a constant, splats expanded.
mlir::LogicalResult writeConstantData(mt::ConstantOp op, std::string &bytes) {
  mlir::ElementsAttr value = op.getValue();
  mlir::Type element = value.getElementType();
  unsigned width = (element.getIntOrFloatBitWidth() + 7) / 8;
  auto append = [&](const llvm::APInt &bits) {
    // Widening first stores an i1 as one byte holding 0 or 1, as BOOL is.
    llvm::APInt wide = bits.zext(width * 8);
    for (unsigned i = 0; i < width; ++i)
      bytes.push_back(static_cast<char>(wide.extractBitsAsZExtValue(8, 8 * i)));
  };
  bytes.reserve(width * value.getNumElements());
  if (mlir::isa<mlir::FloatType>(element)) {
    auto floats = value.tryGetValues<llvm::APFloat>();
    if (!floats)
      return op.emitError("cannot read the constant's values (unsupported "
                          "elements attribute)");
    for (const llvm::APFloat &f : *floats)
      append(f.bitcastToAPInt());
    return mlir::success();
  }
  auto ints = value.tryGetValues<llvm::APInt>();
  if (!ints)
    return op.emitError("cannot read the constant's values (unsupported "
                        "elements attribute)");
  for (const llvm::APInt &i : *ints)
    append(i);
  return mlir::success();
}

} // namespace

mlir::LogicalResult PlanBuilder::emitOp(mlir::Operation *op, int64_t opStep) {
  if (auto param = mlir::dyn_cast<mt::ParamOp>(op)) {
    std::string name = param.getName().str();
    bool compute = masterTypeOf(param) != param.getType();
    const bool device = onDevice(name);
    // A device home's master is already on the device. Fetched in its own
    // type, the kernels read it in place when every read comes before its
    // update (the update rewrites it on the same stream).
    if (device && !compute && readsPrecedeUpdate(param)) {
      valueTensors[param.getResult()] = parameterMasters.at(name);
      return mlir::success();
    }
    mlir::FailureOr<uint32_t> copy =
        addTensor(op, "dev:" + name, param.getType(), pb::PARAMETER_COPY);
    if (mlir::failed(copy))
      return mlir::failure();
    if (device && compute) {
      // In the compute type: a `cast` kernel from the master, which rounds
      // as the host AdamW rounds the bf16 copy it writes (floatToBf16).
      pb::Step &step = addStep(kCompute, op, opStep);
      step.mutable_kernel()->set_kernel("cast");
      step.mutable_kernel()->add_inputs(parameterMasters.at(name));
      step.mutable_kernel()->add_outputs(*copy);
      return placeInArena(op, 0, *copy, opStep, step.index());
    }
    // A device home read after its update: a copy over HBM on the compute
    // stream, in order with the kernels (the update's snapshot).
    pb::Step &step = addStep(device ? kCompute
                             : options.fetchStream ? kParamFetch
                                                   : kHostToDevice,
                             op, opStep);
    step.mutable_copy()->set_src(compute ? computeCopies.at(name)
                                         : parameterMasters.at(name));
    step.mutable_copy()->set_dst(*copy);
    return placeInArena(op, 0, *copy, opStep, step.index());
  }
  if (auto input = mlir::dyn_cast<mt::InputOp>(op)) {
    std::string name = input.getName().str();
    mlir::FailureOr<uint32_t> id = addTensor(op, name, input.getType(), pb::INPUT);
    if (mlir::failed(id))
      return mlir::failure();
    plan.mutable_tensors(*id)->set_source(name);
    // The runtime writes inputs before step 0.
    return placeInArena(op, 0, *id, opStep, 0);
  }
  if (auto constant = mlir::dyn_cast<mt::ConstantOp>(op)) {
    std::string name = "%const" + std::to_string(constants++);
    mlir::FailureOr<uint32_t> id =
        addTensor(op, name, constant.getType(), pb::CONSTANT);
    if (mlir::failed(id) ||
        mlir::failed(writeConstantData(
            constant, *plan.mutable_tensors(*id)->mutable_constant_data())) ||
        mlir::failed(placeInArena(op, 0, *id, opStep, 0)))
      return mlir::failure();
    arena.back().constant = true;
    return mlir::success();
  }
  if (auto lossOp = mlir::dyn_cast<mt::LossOp>(op))
    return emitLoss(lossOp, opStep);
  if (auto output = mlir::dyn_cast<mt::OutputOp>(op))
    return emitOutput(output, opStep);
  if (auto adamw = mlir::dyn_cast<mt::AdamWOp>(op))
    return emitAdamW(adamw, opStep);
  if (auto part = mlir::dyn_cast<mt::GradPartOp>(op))
    return emitGradPart(part, opStep);
  if (auto offload = mlir::dyn_cast<mt::OffloadOp>(op))
    return emitOffload(offload, opStep);
  if (auto prefetch = mlir::dyn_cast<mt::PrefetchOp>(op))
    return emitPrefetch(prefetch, opStep);
  if (mlir::isa<mt::ParamGradOp, mlir::func::ReturnOp>(op))
    return mlir::success();
  if (op->hasAttr(mt::attr::kAlias))
    return emitView(op, opStep);
  return emitKernel(op, opStep);
}

mlir::LogicalResult PlanBuilder::emitView(mlir::Operation *op, int64_t opStep) {
  mlir::FailureOr<uint32_t> base = tensorOf(op, mt::viewBase(op->getResult(0)));
  if (mlir::failed(base))
    return mlir::failure();
  auto entry = arenaIndex.find(*base);
  if (entry == arenaIndex.end() || plan.tensors(*base).buffer().pool() != kDevicePool)
    return op->emitError("mt.alias on a view of '")
           << plan.tensors(*base).name() << "', which is not in the device arena";
  mlir::FailureOr<uint32_t> id = addTensor(op, "view:" + plan.tensors(*base).name(),
                                           op->getResult(0).getType(), pb::ACTIVATION);
  if (mlir::failed(id) ||
      mlir::failed(placeInArena(op, 0, *id, opStep, arena[entry->second].defPlanStep)))
    return mlir::failure();
  const pb::Buffer &bytes = plan.tensors(*base).buffer();
  const pb::Buffer &mine = plan.tensors(*id).buffer();
  if (mine.offset() != bytes.offset() || mine.size_bytes() != bytes.size_bytes())
    return op->emitError("mt.offset ")
           << mine.offset() << " of a view differs from its base's " << bytes.offset()
           << "; run mt-plan-memory after mt-view-aliases";
  plan.mutable_tensors(*id)->set_alias_of(*base);
  arena.back().viewOf = *base;
  requirePlanFormatMinor(*plan.mutable_header(), kPlanMinorAliases);
  return mlir::success();
}

mlir::LogicalResult PlanBuilder::setLastUses() {
  // Plan steps emitted by ops with mt.step <= s.
  auto stepsThrough = [&](int64_t s) -> int64_t {
    auto it = planStepsThrough.upper_bound(s);
    return it == planStepsThrough.begin() ? 0 : std::prev(it)->second;
  };
  for (const ArenaTensor &entry : arena) {
    pb::Tensor *tensor = plan.mutable_tensors(entry.id);
    if (entry.constant) {
      tensor->set_last_use_step(-1);
      continue;
    }
    auto liveEnd = entry.op->getAttrOfType<mlir::DenseI64ArrayAttr>(mt::attr::kLiveEnd);
    if (!liveEnd || liveEnd.size() != static_cast<int64_t>(entry.op->getNumResults()))
      return entry.op->emitError("op has no mt.live_end for each result; run "
                                 "mt-liveness before emitting a plan");
    int64_t end = liveEnd[entry.result];
    int64_t last = -1;
    if (end >= 0) {
      // The last plan step of the last reader op that actually reads it (a
      // READ_LOSS after the loss copy does not).
      for (int64_t step : entry.reads)
        if (planStepOpStep[step] == end)
          last = std::max(last, step);
      if (last < 0) // the reader became no step (e.g. mt.param_grad)
        last = stepsThrough(end) - 1;
    } else {
      // Read by nothing: dead once its defining op's steps are done.
      last = stepsThrough(entry.defOpStep) - 1;
    }
    last = std::max(last, entry.defPlanStep);
    if (!entry.reads.empty() && entry.reads.back() > last)
      return entry.op->emitError("result ")
             << entry.result << " is read at plan step " << entry.reads.back()
             << " after its mt.live_end (step " << last
             << "); mt.live_end is stale, rerun mt-liveness";
    tensor->set_last_use_step(last);
  }
  // A base's bytes live as long as its views (mt-plan-memory placed them so).
  for (const ArenaTensor &entry : arena) {
    if (!entry.viewOf)
      continue;
    pb::Tensor *base = plan.mutable_tensors(*entry.viewOf);
    int64_t viewLast = plan.tensors(entry.id).last_use_step();
    if (base->last_use_step() >= 0)
      base->set_last_use_step(std::max(base->last_use_step(), viewLast));
  }
  return mlir::success();
}


namespace {

/// The graph input a value is, through the offload and prefetch mt-tier may
/// put between an input and a late reader (the token input of a loss at the
/// end of a step under a tight budget); null when it is computed.
mt::InputOp inputBehind(mlir::Value value) {
  while (mlir::Operation *def = value.getDefiningOp()) {
    if (auto input = mlir::dyn_cast<mt::InputOp>(def))
      return input;
    if (auto prefetch = mlir::dyn_cast<mt::PrefetchOp>(def))
      value = prefetch.getHost();
    else if (auto offload = mlir::dyn_cast<mt::OffloadOp>(def))
      value = offload.getValue();
    else
      return nullptr;
  }
  return nullptr;
}

/// A next-token loss: mt.next_token_ce or the fused mt.linear_ce (the
/// output projection with it, mt-fuse-linear-ce); falsy for other ops.
struct NextTokenLoss {
  mlir::Value tokens;
  int64_t ignore = 0;
  explicit operator bool() const { return static_cast<bool>(tokens); }
  mlir::Value getTokens() const { return tokens; }
  int64_t getIgnoreIndex() const { return ignore; }
};

NextTokenLoss nextTokenLoss(mlir::Operation *op) {
  if (auto ce = mlir::dyn_cast_or_null<mt::NextTokenCrossEntropyOp>(op))
    return {ce.getTokens(), static_cast<int64_t>(ce.getIgnoreIndex())};
  if (auto ce = mlir::dyn_cast_or_null<mt::LinearCrossEntropyOp>(op))
    return {ce.getTokens(), static_cast<int64_t>(ce.getIgnoreIndex())};
  return {};
}

} // namespace

mlir::LogicalResult PlanBuilder::setTokenInput(mt::LossOp lossOp) {
  NextTokenLoss ce = nextTokenLoss(lossOp.getValue().getDefiningOp());
  uint64_t microbatches = 1;
  if (auto count = func->getAttrOfType<mlir::IntegerAttr>(kMicrobatchesAttr)) {
    microbatches = static_cast<uint64_t>(count.getInt());
    // The loss is the mean over micro-batches (mt-microbatch); the token
    // input is micro-batch 0's, the one without an "@<k>" suffix.
    ce = {};
    func.walk([&](mlir::Operation *op) {
      NextTokenLoss candidate = nextTokenLoss(op);
      if (!candidate)
        return;
      mt::InputOp input = inputBehind(candidate.getTokens());
      if (!ce && input && !input.getName().contains('@'))
        ce = candidate;
    });
  }
  if (!ce)
    return mlir::success();
  mt::InputOp input = inputBehind(ce.getTokens());
  if (!input)
    return mlir::success();
  auto shape = mlir::cast<mlir::RankedTensorType>(input.getType()).getShape();
  uint64_t tokens = microbatches;
  for (int64_t dim : shape)
    tokens *= static_cast<uint64_t>(dim);
  // With a targets input (mt-add-loss targets=NAME), the loss reads that; the
  // tokens the runtime samples feed the input it names.
  if (auto tokensName = input->getAttrOfType<mlir::StringAttr>("mt.targets_of")) {
    plan.mutable_header()->set_token_input(tokensName.str());
    plan.mutable_header()->set_target_input(input.getName().str());
    plan.mutable_header()->set_ignore_index(ce.getIgnoreIndex());
    requirePlanFormatMinor(*plan.mutable_header(), kPlanMinorTargets);
  } else {
    plan.mutable_header()->set_token_input(input.getName().str());
  }
  plan.mutable_header()->set_tokens_per_step(tokens);
  return mlir::success();
}

mlir::LogicalResult PlanBuilder::build(pb::Plan &out) {
  auto arenaAttr = func->getAttrOfType<mlir::IntegerAttr>(mt::attr::kArenaSize);
  if (!arenaAttr)
    return func.emitError("function has no mt.arena_size; run mt-plan-memory "
                          "before emitting a plan");
  arenaSize = static_cast<uint64_t>(arenaAttr.getInt());
  if (auto stage = func->getAttrOfType<mlir::IntegerAttr>(mt::attr::kHostStageSize))
    stageSize = static_cast<uint64_t>(stage.getInt());
  // Pools after the host staging pool, in this order when present:
  // device_state, disk, disk_stage, grad_stage.
  bool anyDevice = false, anyDisk = false, anyUpdateVisit = false;
  func.walk([&](mt::ParamOp param) {
    if (auto home = param->getAttrOfType<mlir::StringAttr>(mt::attr::kHome)) {
      anyDevice |= home.getValue() == "device";
      anyDisk |= home.getValue() == "disk";
    }
    if (auto accumulate = param->getAttrOfType<mlir::StringAttr>(mt::attr::kAccumulate))
      anyDevice |= accumulate.getValue() == "device";
    if (auto update = param->getAttrOfType<mlir::StringAttr>(mt::attr::kUpdate))
      anyUpdateVisit |= update.getValue() == "visit";
    // Moments kept on the device (visit-master) live in device_state.
    anyDevice |= param->hasAttr(mt::attr::kMoments);
  });
  if (auto ring = func->getAttrOfType<mlir::IntegerAttr>(mt::attr::kGradStageSize))
    gradStage.size = ring.getInt() > 0 ? static_cast<uint64_t>(ring.getInt()) : 0;
  uint32_t nextPool = stageSize > 0 ? kHostStagePool + 1 : kHostStagePool;
  statePool = anyDevice ? nextPool++ : 0;
  diskPool = anyDisk ? nextPool++ : 0;
  diskStagePool = anyDisk ? nextPool++ : 0;
  gradStage.pool = gradStage.size > 0 ? nextPool++ : 0;
  if (auto ring = func->getAttrOfType<mlir::IntegerAttr>(mt::attr::kVisitRingSize))
    visitRing.size = ring.getInt() > 0 ? static_cast<uint64_t>(ring.getInt()) : 0;
  visitRing.pool = visitRing.size > 0 ? nextPool++ : 0;
  if (auto ring = func->getAttrOfType<mlir::IntegerAttr>(mt::attr::kUpdateRingSize))
    updateRing.size = ring.getInt() > 0 ? static_cast<uint64_t>(ring.getInt()) : 0;
  updateRing.pool = updateRing.size > 0 ? nextPool++ : 0;
  if (!func.getBody().hasOneBlock())
    return func.emitError("plan emission expects a function with a single block");

  // Step order is mt.step order, whatever the block order.
  std::vector<std::pair<int64_t, mlir::Operation *>> ordered;
  for (mlir::Operation &op : func.getBody().front()) {
    auto step = op.getAttrOfType<mlir::IntegerAttr>(mt::attr::kStep);
    if (!step)
      return op.emitError("op has no mt.step; run mt-schedule before emitting "
                          "a plan");
    ordered.emplace_back(step.getInt(), &op);
  }
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto &a, const auto &b) { return a.first < b.first; });
  for (size_t i = 1; i < ordered.size(); ++i)
    if (ordered[i].first == ordered[i - 1].first)
      return ordered[i].second->emitError("mt.step ")
             << ordered[i].first << " is used twice";

  plan.set_magic(kPlanMagic);
  pb::Header *header = plan.mutable_header();
  header->set_format_major(kPlanFormatMajor);
  header->set_format_minor(0);
  header->set_generator(options.generator);
  for (const std::string &option : options.compileOptions)
    header->add_compile_options(option);
  mlir::ModuleOp module = func->getParentOfType<mlir::ModuleOp>();
  if (auto source = module->getAttrOfType<mlir::StringAttr>("mt.source_model"))
    header->set_source_model(source.str());
  if (auto sha = module->getAttrOfType<mlir::StringAttr>("mt.source_sha256"))
    header->set_source_sha256(sha.str());
  header->set_microbatches(1);
  if (auto count = func->getAttrOfType<mlir::IntegerAttr>(kMicrobatchesAttr))
    header->set_microbatches(static_cast<uint32_t>(count.getInt()));
  if (auto budget = func->getAttrOfType<mlir::IntegerAttr>(mt::attr::kDeviceBudget))
    header->set_device_budget_bytes(static_cast<uint64_t>(budget.getInt()));
  if (auto policy = func->getAttrOfType<mlir::StringAttr>(mt::attr::kTieringPolicy))
    header->set_tiering_policy(policy.str());
  // The capacities mt-homes chose the homes for (-1, unlimited, as 0).
  auto capacity = [&](llvm::StringRef name) -> uint64_t {
    auto attr = func->getAttrOfType<mlir::IntegerAttr>(name);
    return attr && attr.getInt() > 0 ? static_cast<uint64_t>(attr.getInt()) : 0;
  };
  header->set_device_capacity_bytes(capacity(mt::attr::kDeviceCapacity));
  header->set_host_capacity_bytes(capacity(mt::attr::kHostCapacity));
  header->set_disk_capacity_bytes(capacity(mt::attr::kDiskCapacity));
  for (const char *stream : {kCompute, kHostToDevice, kDeviceToHost, kHostStream})
    plan.add_streams(stream);
  if (anyDisk)
    plan.add_streams(kDiskStream);
  // The visiting updates run on their own stream, beside the backward's
  // kernels, as each waits for its fetch.
  if ((anyDevice && options.optimizerStream) || anyUpdateVisit)
    plan.add_streams(kOptimizerStream);

  std::vector<mlir::Operation *> ops;
  for (auto &[step, op] : ordered) {
    ops.push_back(op);
    if (auto update = mlir::dyn_cast<mt::AdamWOp>(op))
      updateSteps[update.getParam().str()] = step;
  }
  if (mlir::failed(addParameterMasters(ops)) || mlir::failed(addDiskState(ops)))
    return mlir::failure();
  findProductParts(ops);
  findVisits(ops);
  findUpdateVisits(ops);
  // The first disk update's state is read back first of all (HostTaskEmitter.cpp).
  if (!diskStates.empty())
    for (auto &[step, op] : ordered)
      if (auto update = mlir::dyn_cast<mt::AdamWOp>(op);
          update && update.getParam() == diskStates.front().param) {
        emitDiskReadBack(0, op, ordered.begin()->first);
        break;
      }
  for (auto &[step, op] : ordered) {
    if (mlir::failed(emitVisitFetches(op, step)) || mlir::failed(emitUpdateVisitFetches(op, step)) ||
        mlir::failed(emitOp(op, step)))
      return mlir::failure();
    planStepsThrough[step] = plan.steps_size();
  }
  if (std::any_of(plan.steps().begin(), plan.steps().end(),
                  [](const pb::Step &s) { return s.stream() == kParamFetch; }))
    plan.add_streams(kParamFetch);
  if (!loss)
    return func.emitError("the function has no mt.loss; a plan needs a loss "
                          "to report (run mt-add-loss)");
  for (auto &[param, part] : lastPart)
    if (!updates.count(param))
      return part.emitError("the gradient parts of '")
             << param << "' reach no mt.adamw (run mt-adamw after mt-microbatch)";
  // An evaluation step (mt-add-loss forward-only) computes the loss and
  // nothing else: a gradient sink or update in it is a pipeline bug.
  if (func->hasAttr(mt::attr::kEvaluation)) {
    for (auto &[step, op] : ordered)
      if (mlir::isa<mt::ParamGradOp, mt::GradPartOp, mt::AdamWOp>(op))
        return op->emitError("an evaluation step (mt.evaluation) has no "
                             "gradients or updates, but holds this op");
    header->set_evaluation(true);
    requirePlanFormatMinor(*header, kPlanMinorEvaluation);
  }
  // The compute precision (mt-precision; fp32 when it did not run). A plan
  // in another precision, or with compute copies, is minor 3.
  std::string precision = "fp32";
  if (auto attr = func->getAttrOfType<mlir::StringAttr>(mt::attr::kPrecision))
    precision = attr.str();
  header->set_precision(precision);
  if (precision != "fp32" || !computeCopies.empty())
    requirePlanFormatMinor(*header, kPlanMinorPrecision);
  if (mlir::failed(setLastUses()) || mlir::failed(setTokenInput(*loss)))
    return mlir::failure();

  pb::Pool *device = plan.add_pools();
  device->set_id(kDevicePool);
  device->set_name("device");
  device->set_tier(pb::DEVICE);
  device->set_size_bytes(arenaSize);
  pb::Pool *host = plan.add_pools();
  host->set_id(kHostPool);
  host->set_name("host");
  host->set_tier(pb::HOST_PINNED);
  host->set_size_bytes(hostTop);
  if (stageSize > 0) {
    pb::Pool *stage = plan.add_pools();
    stage->set_id(kHostStagePool);
    stage->set_name("host_stage");
    stage->set_tier(pb::HOST_PINNED);
    stage->set_size_bytes(stageSize);
  }
  if (stateTop > 0) {
    pb::Pool *state = plan.add_pools();
    state->set_id(statePool);
    state->set_name("device_state");
    state->set_tier(pb::DEVICE);
    state->set_size_bytes(stateTop);
    requirePlanFormatMinor(*header, kPlanMinorHomes);
  }
  if (anyDisk) {
    pb::Pool *disk = plan.add_pools();
    disk->set_id(diskPool);
    disk->set_name("disk");
    disk->set_tier(pb::DISK);
    disk->set_size_bytes(diskTop);
    // Two slots, each holding one parameter's m and v.
    pb::Pool *stage = plan.add_pools();
    stage->set_id(diskStagePool);
    stage->set_name("disk_stage");
    stage->set_tier(pb::HOST_PINNED);
    stage->set_size_bytes(4 * diskSlotBytes);
    requirePlanFormatMinor(*header, kPlanMinorHomes);
  }
  if (gradStage.extent > 0) {
    // The ring every host update's gradient passes through (mt-homes sized
    // it), as far as its tensors reach; a plan without host updates has none.
    pb::Pool *ring = plan.add_pools();
    ring->set_id(gradStage.pool);
    ring->set_name("grad_stage");
    ring->set_tier(pb::HOST_PINNED);
    ring->set_size_bytes(gradStage.extent);
  }
  // The device rings the visits pass through (accumulators, then updates), as
  // far as their tensors reach; each one's id follows the pools above it
  // (its tensors were placed under a provisional, higher one).
  auto addDeviceRing = [&](const RingPool &visits, const char *name) {
    if (visits.extent == 0)
      return;
    const uint32_t id = static_cast<uint32_t>(plan.pools_size());
    for (pb::Tensor &tensor : *plan.mutable_tensors())
      if (tensor.role() == pb::STATE_STAGE && tensor.buffer().pool() == visits.pool)
        tensor.mutable_buffer()->set_pool(id);
    pb::Pool *ring = plan.add_pools();
    ring->set_id(id);
    ring->set_name(name);
    ring->set_tier(pb::DEVICE);
    ring->set_size_bytes(visits.extent);
  };
  addDeviceRing(visitRing, "acc_visit");
  addDeviceRing(updateRing, "update_visit");

  out = std::move(plan);
  return mlir::success();
}

} // namespace megatrain::emission

namespace megatrain {

std::string formatLocation(mlir::Location loc) {
  if (auto file = mlir::dyn_cast<mlir::FileLineColLoc>(loc)) {
    // The importer locates nodes in a binary file: line 0 means no line.
    if (file.getLine() == 0 && file.getColumn() == 0)
      return file.getFilename().str();
    return (file.getFilename().getValue() + ":" + llvm::Twine(file.getLine()) +
            ":" + llvm::Twine(file.getColumn()))
        .str();
  }
  if (auto name = mlir::dyn_cast<mlir::NameLoc>(loc)) {
    std::string child = formatLocation(name.getChildLoc());
    return child.empty() ? name.getName().str()
                         : name.getName().str() + " (" + child + ")";
  }
  if (auto fused = mlir::dyn_cast<mlir::FusedLoc>(loc)) {
    std::string joined;
    for (mlir::Location part : fused.getLocations()) {
      std::string text = formatLocation(part);
      if (text.empty())
        continue;
      joined += joined.empty() ? text : ", " + text;
    }
    return joined;
  }
  if (auto call = mlir::dyn_cast<mlir::CallSiteLoc>(loc))
    return formatLocation(call.getCallee());
  if (auto opaque = mlir::dyn_cast<mlir::OpaqueLoc>(loc))
    return formatLocation(opaque.getFallbackLocation());
  return "";
}

mlir::FailureOr<plan::Plan> emitPlan(mlir::ModuleOp module,
                                     const PlanEmitOptions &options) {
  mlir::func::FuncOp main;
  for (auto func : module.getOps<mlir::func::FuncOp>()) {
    if (func.isExternal())
      continue;
    if (main && main.getSymName() != "main" && func.getSymName() != "main")
      return func.emitError("plan emission expects one function (or one named "
                            "@main), found @")
             << main.getSymName() << " and @" << func.getSymName();
    if (!main || func.getSymName() == "main")
      main = func;
  }
  if (!main)
    return module.emitError("the module has no function to emit as a plan");
  plan::Plan plan;
  if (mlir::failed(emission::PlanBuilder(main, options).build(plan)))
    return mlir::failure();
  // The host updates that run on into the next step, in the order that
  // lets the next step start soonest (docs/tiering.md, "The host update order").
  if (options.hostOrderProfile) {
    HostOrderResult ordered = orderHostUpdates(plan, *options.hostOrderProfile);
    if (options.hostOrder)
      *options.hostOrder = ordered;
  }
  // Last: orders the streams (docs/tiering.md, "Streams and events").
  insertEvents(plan);
  return plan;
}

} // namespace megatrain
