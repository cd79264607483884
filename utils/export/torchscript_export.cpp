#include "utils/export/torchscript_export.h"

#include <torch/script.h>
#include <torch/torch.h>

#include <algorithm>
#include <sstream>

#include "utils/core/format.h"

namespace yolo {

namespace {

// A parameter's attribute name: "model.2.m.0.cv1.conv.weight" -> "model_2_m_0_cv1_conv_weight".
std::string ident(std::string name) {
  for (char& c : name) {
    if (c == '.') c = '_';
  }
  return name;
}

std::string ints(std::initializer_list<int64_t> v) {
  std::string s = "[";
  for (int64_t x : v) s += (s.size() > 1 ? ", " : "") + std::to_string(x);
  return s + "]";
}

std::string number(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  std::string t = s.str();
  if (t.find_first_of(".e") == std::string::npos) t += ".0";
  return t;
}

// The decoding of YOLOv5's Detect.forward in eval mode, for any map size.
constexpr const char* kDecode = R"(
def _decode(self, y, na: int, no: int, stride: float, anchor_grid):
    bs, ny, nx = y.size(0), y.size(2), y.size(3)
    s = y.view([bs, na, no, ny, nx]).permute([0, 1, 3, 4, 2]).sigmoid()
    gy = torch.arange(ny, dtype=s.dtype, device=s.device).view([ny, 1]).expand([ny, nx])
    gx = torch.arange(nx, dtype=s.dtype, device=s.device).view([1, nx]).expand([ny, nx])
    grid = torch.stack([gx, gy], 2).view([1, 1, ny, nx, 2]) - 0.5
    xy = (s[..., 0:2] * 2 + grid) * stride
    wh = (s[..., 2:4] * 2) ** 2 * anchor_grid.to(s.dtype)
    return torch.cat([xy, wh, s[..., 4:]], 4).view([bs, na * ny * nx, no])
)";

// Ultralytics' Attention on its qkv map; v (qkv's value channels) gives the output's shape.
constexpr const char* kAttention = R"(
def _attention(self, qkv, v, nh: int, kd: int, hd: int, scale: float):
    bs, n = qkv.size(0), qkv.size(2) * qkv.size(3)
    p = qkv.reshape([bs, nh, 2 * kd + hd, n])
    q, k, val = p[:, :, 0:kd], p[:, :, kd:2 * kd], p[:, :, 2 * kd:]
    a = torch.matmul((q * scale).transpose(-2, -1), k).softmax(-1)
    return torch.matmul(val, a.transpose(-2, -1)).reshape(v.size())
)";

// Ultralytics' anchor-free decoding of one level, channels first: the distance bins' softmax
// expectation (DFL), boxes around each cell's centre, sigmoid class scores; (bs, 4 + nc, ny*nx).
constexpr const char* kDecodeAnchorFree = R"(
def _decode_af(self, box, cls, reg_max: int, stride: float, bins):
    bs, ny, nx = box.size(0), box.size(2), box.size(3)
    if reg_max > 1:
        d = box.reshape([bs, 4, reg_max, ny * nx]).softmax(2)
        d = torch.matmul(bins.to(d.dtype).view([1, 1, 1, reg_max]), d).view([bs, 4, ny * nx])
    else:
        d = box.reshape([bs, 4, ny * nx])
    gy = torch.arange(ny, dtype=d.dtype, device=d.device).view([ny, 1]).expand([ny, nx])
    gx = torch.arange(nx, dtype=d.dtype, device=d.device).view([1, nx]).expand([ny, nx])
    a = torch.stack([gx, gy], 0).view([1, 2, ny * nx]) + 0.5
    x1y1 = a - d[:, 0:2]
    x2y2 = a + d[:, 2:4]
    xywh = torch.cat([(x1y1 + x2y2) / 2, x2y2 - x1y1], 1) * stride
    return torch.cat([xywh, cls.reshape([bs, cls.size(1), ny * nx]).sigmoid()], 1)
)";

// Ultralytics' Detect.postprocess of the one-to-one head's (bs, 4 + nc, N) xywh output: the k
// anchors with the best class scores, then the k best (anchor, class) scores among them, as rows
// x1, y1, x2, y2, score, class (bs, k, 6), k = min(max_det, N).
constexpr const char* kTopk = R"(
def _topk(self, y, max_det: int):
    t = y.transpose(1, 2)
    nc = t.size(2) - 4
    k = min(max_det, t.size(1))
    scores = t[:, :, 4:]
    anchors = scores.amax(2).topk(k, 1)[1]
    candidates = scores.gather(1, anchors.unsqueeze(-1).expand([-1, -1, nc]))
    score, flat = candidates.flatten(1).topk(k, 1)
    anchor = anchors.gather(1, torch.div(flat, nc, rounding_mode='floor'))
    b = t[:, :, 0:4].gather(1, anchor.unsqueeze(-1).expand([-1, -1, 4]))
    xy, half_wh = b[:, :, 0:2], b[:, :, 2:4] * 0.5
    cls = torch.remainder(flat, nc).unsqueeze(-1).to(t.dtype)
    return torch.cat([xy - half_wh, xy + half_wh, score.unsqueeze(-1), cls], 2)
)";

// The activation as a TorchScript expression of `x` (LibTorch's builtins: no Python modules).
std::string activation(ExportAct a, double alpha, const std::string& x) {
  switch (a) {
    case ExportAct::kNone:
      return x;
    case ExportAct::kSiLU:
      return "torch.silu(" + x + ")";
    case ExportAct::kReLU:
      return "torch.relu(" + x + ")";
    case ExportAct::kLeakyReLU:
      return "torch.leaky_relu(" + x + ", " + number(alpha) + ")";
    case ExportAct::kReLU6:
      return "torch.hardtanh(" + x + ", 0.0, 6.0)";
    case ExportAct::kHardswish:
      return "torch.hardswish(" + x + ")";
    case ExportAct::kSigmoid:
      return "torch.sigmoid(" + x + ")";
    case ExportAct::kTanh:
      return "torch.tanh(" + x + ")";
    case ExportAct::kGELU:
      return "torch.gelu(" + x + ")";
    case ExportAct::kMish:
      return "torch.mish(" + x + ")";
    case ExportAct::kELU:
      return "torch.elu(" + x + ", " + number(alpha) + ")";
  }
  return x;
}

}  // namespace

std::string torchscript_source(const ExportGraph& g) {
  std::ostringstream src;
  const ExportHead& h = g.head;
  // End to end, forward is the top-k of `decoded`, the one-to-one head's decoded output.
  if (h.end2end) {
    src << "def forward(self, images):\n    return self._topk(self.decoded(images), " << h.max_det
        << ")\n"
        << kTopk;
  }
  src << "def " << (h.end2end ? "decoded" : "forward") << "(self, images):\n";
  auto v = [](int id) { return id == 0 ? std::string("images") : "x" + std::to_string(id); };
  for (size_t k = 0; k < g.ops.size(); ++k) {
    const ExportOp& op = g.ops[k];
    const std::string out = v(static_cast<int>(k) + 1);
    src << "    " << out << " = ";
    switch (op.kind) {
      case ExportOp::Kind::kConv:
        src << "torch.conv2d(" << v(op.inputs[0]) << ", self." << ident(op.name + ".weight")
            << ", self." << ident(op.name + ".bias") << ", " << ints({op.stride, op.stride_w})
            << ", " << ints({op.pad, op.pad_w}) << ", " << ints({op.dilation, op.dilation}) << ", "
            << op.groups << ")\n";
        if (op.act != ExportAct::kNone) {
          src << "    " << out << " = " << activation(op.act, op.alpha, out) << "\n";
        }
        break;
      case ExportOp::Kind::kAct:
        src << activation(op.act, op.alpha, v(op.inputs[0])) << "\n";
        break;
      case ExportOp::Kind::kSpaceToDepth: {
        const std::string x = v(op.inputs[0]);
        src << "torch.cat([" << x << "[..., ::2, ::2], " << x << "[..., 1::2, ::2], " << x
            << "[..., ::2, 1::2], " << x << "[..., 1::2, 1::2]], 1)\n";
        break;
      }
      case ExportOp::Kind::kPad:
        src << "torch.constant_pad_nd(" << v(op.inputs[0]) << ", "
            << ints({op.pads[0], op.pads[1], op.pads[2], op.pads[3]}) << ", 0.0)\n";
        break;
      case ExportOp::Kind::kAdd:
        src << v(op.inputs[0]) << " + " << v(op.inputs[1]) << "\n";
        break;
      case ExportOp::Kind::kConcat: {
        src << "torch.cat([";
        for (size_t i = 0; i < op.inputs.size(); ++i) src << (i ? ", " : "") << v(op.inputs[i]);
        src << "], 1)\n";
        break;
      }
      case ExportOp::Kind::kMaxPool:
        src << "torch.max_pool2d(" << v(op.inputs[0]) << ", " << ints({op.kernel, op.kernel_w})
            << ", " << ints({op.stride, op.stride_w}) << ", " << ints({op.pad, op.pad_w})
            << ", [1, 1], False)\n";
        break;
      case ExportOp::Kind::kUpsample:
        src << "torch.upsample_nearest2d(" << v(op.inputs[0]) << ", None, [" << number(op.scale)
            << ", " << number(op.scale) << "])\n";
        break;
      case ExportOp::Kind::kSlice: {
        src << "torch.cat([";
        for (size_t i = 0; i + 1 < op.ranges.size(); i += 2) {
          src << (i ? ", " : "") << v(op.inputs[0]) << "[:, " << op.ranges[i] << ":"
              << op.ranges[i + 1] << "]";
        }
        src << "], 1)\n";
        break;
      }
      case ExportOp::Kind::kAttention:
        src << "self._attention(" << v(op.inputs[0]) << ", " << v(op.inputs[1]) << ", " << op.heads
            << ", " << op.key_dim << ", " << op.head_dim << ", " << number(op.attn_scale) << ")\n";
        break;
    }
  }
  if (h.anchor_free) {
    src << "    levels = [";
    for (size_t i = 0; i < h.box.size(); ++i) {
      src << (i ? ",\n              " : "") << "self._decode_af(" << v(h.box[i]) << ", "
          << v(h.cls[i]) << ", " << h.reg_max << ", " << number(h.stride[i]) << ", self.dfl_bins)";
    }
    src << "]\n    return torch.cat(levels, 2)\n" << kDecodeAnchorFree;
  } else {
    src << "    levels = [";
    for (size_t i = 0; i < h.inputs.size(); ++i) {
      const std::string conv = "detect_m_" + std::to_string(i);
      src << (i ? ",\n              " : "") << "self._decode(torch.conv2d(" << v(h.inputs[i])
          << ", self." << conv << "_weight, self." << conv << "_bias), " << h.na << ", " << h.no()
          << ", " << number(h.stride[i]) << ", self.anchor_grid_" << i << ")";
    }
    src << "]\n    return torch.cat(levels, 1)\n" << kDecode;
  }
  const bool attention = std::any_of(g.ops.begin(), g.ops.end(), [](const ExportOp& op) {
    return op.kind == ExportOp::Kind::kAttention;
  });
  if (attention) src << kAttention;
  return src.str();
}

std::string torchscript_config_json(const TorchScriptOptions& o) {
  std::string s = "{\"shape\": [";
  for (size_t i = 0; i < o.shape.size(); ++i) s += (i ? ", " : "") + std::to_string(o.shape[i]);
  s += "], \"stride\": " + std::to_string(o.stride) + ", \"names\": {";
  for (size_t i = 0; i < o.names.size(); ++i) {
    s += (i ? ", " : "") + json_quote(std::to_string(i)) + ": " + json_quote(o.names[i]);
  }
  return s + "}, \"dynamic\": true}";
}

std::string torchscript_bytes(const ExportGraph& g, const TorchScriptOptions& o) {
  const torch::Dtype dtype = o.half ? torch::kHalf : torch::kFloat;
  auto tensor = [&](const ExportArray& a) {
    return torch::from_blob(const_cast<float*>(a.values.data()), a.dims, torch::kFloat)
        .to(o.device, dtype, /*non_blocking=*/false, /*copy=*/true);
  };
  torch::jit::Module m("__torch__.yolo.DetectionModel");
  auto param = [&](const std::string& name, const ExportArray& a) {
    m.register_parameter(ident(name), tensor(a), /*is_buffer=*/false);
  };
  for (const ExportOp& op : g.ops) {
    if (op.kind != ExportOp::Kind::kConv) continue;
    param(op.name + ".weight", op.weight);
    param(op.name + ".bias", op.bias);
  }
  const ExportHead& h = g.head;
  if (h.anchor_free) {
    m.register_buffer("dfl_bins",
                      h.dfl_bins.values.empty() ? tensor({{1}, {0.0f}}) : tensor(h.dfl_bins));
  }
  for (size_t i = 0; !h.anchor_free && i < h.inputs.size(); ++i) {
    param("detect.m." + std::to_string(i) + ".weight", h.weight[i]);
    param("detect.m." + std::to_string(i) + ".bias", h.bias[i]);
    m.register_buffer("anchor_grid_" + std::to_string(i),
                      tensor(h.anchors)[static_cast<int64_t>(i)].view({1, h.na, 1, 1, 2}));
  }
  m.define(torchscript_source(g));
  m.eval();
  std::ostringstream os;
  m.save(os, {{"config.txt", o.config_json.empty() ? torchscript_config_json(o) : o.config_json}});
  return os.str();
}

}  // namespace yolo
