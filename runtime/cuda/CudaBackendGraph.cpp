// CudaBackendGraph.cpp - a training step's issue recorded once as a CUDA graph and replayed (docs/runtime.md, "Step graphs").
//
// The executor issues the plan's steps one call at a time: about one launch
// per step, each a few microseconds of host work, which a small model's step
// is made of. Every address of a plan is fixed at prepare(), so the second
// training step's issue is recorded (stream capture) and each later step is
// one cudaGraphLaunch.
//
// Recording: compute_ is captured, every other stream of the plan joins the
// capture through an event recorded on compute_ at its start (so that a copy
// issued before any wait is captured too, not run), and compute_ waits for
// each of them at its end. The plan's own records and waits order everything
// between, as when issued. Host tasks become host nodes reading their slot
// (HostTaskSlot) when they run, as issued host tasks do.
//
// What changes between replays: the step count t and the AdamW
// hyper-parameters (the lr of a schedule) of every AdamW, and where READ_LOSS
// writes the loss. A host AdamW's slot is rewritten before each replay; a
// device AdamW's kernel node gets the update constants of the new t and lr
// (setAdamWNodeStep). Nothing else a step issues depends on the step.
//
// Which plans are recorded (CudaOptions::StepGraphs): with Auto, the default,
// those whose predicted device time per plan step is under
// kIssueBoundStepSeconds (or that carry no prediction); a plan with longer
// steps is issued call by call, as its issue keeps ahead of the device and a
// replay would add the graph's launch to the step.
//
// What is not recorded (canRecordSteps is false): poisoning (a diagnostic),
// MEGATRAIN_CUDA_SYNC (a wait after every step), the disk tier (its copies
// are jobs of the disk I/O thread, numbered per step), CudaOptions::stepGraphs
// off or MEGATRAIN_CUDA_GRAPHS=0; the executor issues traced and clipped
// steps as always. A call that cannot be captured fails the recording:
// nothing of the step ran, the executor issues it again, and the plan is
// not recorded again (stepRecordingFailure says why).
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "CudaBackendImpl.h"
#include "DeviceAdamW.h"
#include "megatrain/plan/Error.h"

namespace megatrain::runtime::cuda {

bool CudaBackend::canRecordSteps() const {
  const bool disk = std::any_of(diskFiles_.begin(), diskFiles_.end(), [](const auto& file) { return file != nullptr; });
  return stepGraphs_ != CudaOptions::StepGraphs::Off && plan_ && !recordingRefused_ && !poison_ && !syncEveryKernel_ &&
         !disk && (stepGraphs_ == CudaOptions::StepGraphs::On || !stepIssueKeepsUp(*plan_));
}

std::vector<cudaStream_t> CudaBackend::sideStreams() const {
  std::vector<cudaStream_t> side;
  for (const auto& [name, stream] : streams_)
    if (stream != compute_ && std::find(side.begin(), side.end(), stream) == side.end()) side.push_back(stream);
  return side;
}

void CudaBackend::beginStepRecording() {
  if (!canRecordSteps()) throw Error("cuda backend: this plan's steps cannot be recorded");
  drain();
  releaseStepGraph();
  if (!recordFork_) MT_CUDA_CHECK(cudaEventCreateWithFlags(&recordFork_, cudaEventDisableTiming));
  const std::vector<cudaStream_t> side = sideStreams();
  while (recordJoins_.size() < side.size()) {
    cudaEvent_t event = nullptr;
    MT_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    recordJoins_.push_back(event);
  }
  // Thread-local: the host tasks' and the disk thread's CUDA-free work is not ours to refuse.
  MT_CUDA_CHECK(cudaStreamBeginCapture(compute_, cudaStreamCaptureModeThreadLocal));
  recording_ = true;
  MT_CUDA_CHECK(cudaEventRecord(recordFork_, compute_));
  for (cudaStream_t stream : side) MT_CUDA_CHECK(cudaStreamWaitEvent(stream, recordFork_, 0));
}

bool CudaBackend::endStepRecording(const std::string& failure) {
  const bool complete = failure.empty();
  if (!recording_) return false;
  recording_ = false;
  // Join every stream that joined; a failure here leaves the capture to end below.
  cudaError_t joined = cudaSuccess;
  const std::vector<cudaStream_t> side = sideStreams();
  for (size_t i = 0; i < side.size() && joined == cudaSuccess; ++i) {
    joined = cudaEventRecord(recordJoins_[i], side[i]);
    if (joined == cudaSuccess) joined = cudaStreamWaitEvent(compute_, recordJoins_[i], 0);
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(compute_, &graph);
  cudaError_t made = ended;
  if (complete && joined == cudaSuccess && ended == cudaSuccess && graph)
    made = cudaGraphInstantiateWithFlags(&stepGraph_, graph, 0);
  if (!complete || joined != cudaSuccess || ended != cudaSuccess || made != cudaSuccess || !graph) {
    const cudaError_t cause = joined != cudaSuccess ? joined : ended != cudaSuccess ? ended : made;
    recordingFailure_ = !complete ? failure : std::string("CUDA graph capture: ") + cudaGetErrorString(cause);
    (void)cudaGetLastError();  // a failed capture's errors are not sticky; clear the last one
    if (graph) cudaGraphDestroy(graph);
    stepGraph_ = nullptr;
    graphAdamW_.clear();
    graphHostTasks_.clear();
    recordingRefused_ = true;
    return false;
  }
  graph_ = graph;
  return true;
}

void CudaBackend::recordAdamWNode(cudaStream_t stream, plan::DType dtype) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaGraphNode_t* last = nullptr;
  size_t count = 0;
  MT_CUDA_CHECK(cudaStreamGetCaptureInfo(stream, &status, nullptr, nullptr, &last, nullptr, &count));
  if (status != cudaStreamCaptureStatusActive || count != 1)
    throw Error("cuda backend: the recorded AdamW kernel is not the last node of its stream");
  graphAdamW_.push_back(GraphAdamW{last[0], dtype});
}

void CudaBackend::replayStep(const plan::AdamW& hyper, int64_t t, double* loss) {
  if (!stepGraph_) throw Error("cuda backend: no recorded step to replay");
  for (const GraphAdamW& node : graphAdamW_) setAdamWNodeStep(stepGraph_, node.node, node.dtype, hyper, t);
  // The previous step ended with a synchronize: no host node reads a slot now.
  for (uint32_t step : graphHostTasks_) {
    HostTaskSlot& slot = hostSlots_[step];
    slot.traceAt = HostTaskSlot::kUntraced;
    if (slot.kind == HostTaskSlot::Kind::AdamW) {
      slot.hyper = hyper;
      slot.t = t;
    } else if (slot.kind == HostTaskSlot::Kind::ReadLoss) {
      slot.loss = loss;
    }
  }
  MT_CUDA_CHECK(cudaGraphLaunch(stepGraph_, compute_));
}

void CudaBackend::releaseStepGraph() {
  if (stepGraph_) cudaGraphExecDestroy(stepGraph_);
  if (graph_) cudaGraphDestroy(graph_);
  stepGraph_ = nullptr;
  graph_ = nullptr;
  graphAdamW_.clear();
  graphHostTasks_.clear();
}

}  // namespace megatrain::runtime::cuda

namespace megatrain::runtime {

bool stepIssueKeepsUp(const plan::Plan& plan) {
  const double predicted = plan.header().predicted_step_s();
  return predicted > 0 && plan.steps_size() > 0 &&
         predicted >= kIssueBoundStepSeconds * static_cast<double>(plan.steps_size());
}

}  // namespace megatrain::runtime
