#include "utils/export/onnx_export.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <utility>

#ifdef YOLO_WITH_ONNX
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#endif

namespace yolo {

uint16_t float16_bits(float f) {
  uint32_t x = 0;
  std::memcpy(&x, &f, sizeof(x));
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  uint32_t mant = x & 0x7fffffu;
  const int exp = static_cast<int>((x >> 23) & 0xffu);
  if (exp == 0xff) return sign | 0x7c00u | (mant ? 0x200u : 0u);  // inf, NaN
  const int e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00u;  // too large: inf
  uint32_t h = 0, rem = 0, halfway = 0;
  if (e <= 0) {  // a subnormal half, or zero
    if (e < -10) return sign;
    mant |= 0x800000u;
    const int shift = 14 - e;
    h = mant >> shift;
    rem = mant & ((1u << shift) - 1);
    halfway = 1u << (shift - 1);
  } else {
    h = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
    rem = mant & 0x1fffu;
    halfway = 0x1000u;
  }
  if (rem > halfway || (rem == halfway && (h & 1u))) ++h;  // a carry moves into the exponent
  return static_cast<uint16_t>(sign | h);
}

std::string python_names_dict(const std::vector<std::string>& names) {
  std::string s = "{";
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& n = names[i];
    // Python's repr: single quotes unless the text has one and no double quote.
    const char q =
        n.find('\'') != std::string::npos && n.find('"') == std::string::npos ? '"' : '\'';
    std::string lit(1, q);
    for (const char ch : n) {
      const auto u = static_cast<unsigned char>(ch);
      if (ch == '\\' || ch == q) {
        lit += '\\';
        lit += ch;
      } else if (ch == '\n') {
        lit += "\\n";
      } else if (ch == '\r') {
        lit += "\\r";
      } else if (ch == '\t') {
        lit += "\\t";
      } else if (u < 0x20 || u == 0x7f) {
        char hex[8];
        std::snprintf(hex, sizeof(hex), "\\x%02x", u);
        lit += hex;
      } else {
        lit += ch;
      }
    }
    lit += q;
    s += (i ? ", " : "") + std::to_string(i) + ": " + lit;
  }
  return s + "}";
}

#ifndef YOLO_WITH_ONNX

bool onnx_export_available() { return false; }

std::string onnx_model_bytes(const ExportGraph&, const OnnxOptions&) {
  throw std::runtime_error(
      "this build has no ONNX library: install Debian's libonnx-dev and libprotobuf-dev "
      "(scripts/setup.sh does) and build again");
}

#else

namespace {

// ONNX's IR version for each opset's release (onnx/helper.py's VERSION_TABLE).
int64_t ir_version_for(int opset) {
  if (opset <= 11) return 6;
  if (opset <= 14) return 7;
  return 8;
}

class GraphWriter {
 public:
  GraphWriter(onnx::GraphProto* g, const OnnxOptions& o)
      : g_(g), o_(o), float_type_(o.half ? onnx::TensorProto::FLOAT16 : onnx::TensorProto::FLOAT) {}

  int float_type() const { return float_type_; }

  // A float initializer in the graph's float type (float32, or float16 with --half).
  std::string weight(const std::string& name, const ExportArray& a) {
    onnx::TensorProto* p = g_->add_initializer();
    p->set_name(name);
    p->set_data_type(float_type_);
    for (int64_t d : a.dims) p->add_dims(d);
    if (o_.half) {
      std::string raw(a.values.size() * 2, '\0');
      for (size_t i = 0; i < a.values.size(); ++i) {
        const uint16_t h = float16_bits(a.values[i]);
        std::memcpy(&raw[2 * i], &h, 2);  // little-endian, as ONNX's raw_data
      }
      p->set_raw_data(raw);
    } else {
      p->set_raw_data(std::string(reinterpret_cast<const char*>(a.values.data()),
                                  a.values.size() * sizeof(float)));
    }
    return name;
  }
  std::string constant(const ExportArray& a) { return weight(fresh("const"), a); }
  std::string float32s(const std::vector<float>& v) {
    onnx::TensorProto* p = initializer(onnx::TensorProto::FLOAT, {static_cast<int64_t>(v.size())});
    for (float x : v) p->add_float_data(x);
    return p->name();
  }
  std::string int64_scalar(int64_t x) {
    onnx::TensorProto* p = initializer(onnx::TensorProto::INT64, {});
    p->add_int64_data(x);
    return p->name();
  }
  std::string int64s(const std::vector<int64_t>& v) {
    onnx::TensorProto* p = initializer(onnx::TensorProto::INT64, {static_cast<int64_t>(v.size())});
    for (int64_t x : v) p->add_int64_data(x);
    return p->name();
  }

  // A node with one output; returns the output's name.
  onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& in,
                        std::string* out) {
    onnx::NodeProto* n = g_->add_node();
    n->set_op_type(op);
    n->set_name(op + "_" + std::to_string(g_->node_size()));
    for (const auto& i : in) n->add_input(i);
    *out = fresh(op);
    n->add_output(*out);
    return n;
  }
  std::string op(const std::string& type, const std::vector<std::string>& in) {
    std::string out;
    node(type, in, &out);
    return out;
  }
  static void ints(onnx::NodeProto* n, const char* name, const std::vector<int64_t>& v) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  static void integer(onnx::NodeProto* n, const char* name, int64_t v) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void text(onnx::NodeProto* n, const char* name, const std::string& v) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }

  std::string conv(const std::string& x, const std::string& w, const std::string& b, int64_t k,
                   int64_t s, int64_t p, int64_t d, int64_t groups) {
    return conv(x, w, b, {k, k}, {s, s}, {p, p}, d, groups);
  }
  // Kernel, strides and pads as (height, width).
  std::string conv(const std::string& x, const std::string& w, const std::string& b,
                   std::array<int64_t, 2> k, std::array<int64_t, 2> s, std::array<int64_t, 2> p,
                   int64_t d, int64_t groups) {
    std::string out;
    onnx::NodeProto* n = node("Conv", {x, w, b}, &out);
    ints(n, "kernel_shape", {k[0], k[1]});
    ints(n, "strides", {s[0], s[1]});
    ints(n, "pads", {p[0], p[1], p[0], p[1]});
    ints(n, "dilations", {d, d});
    integer(n, "group", groups);
    return out;
  }
  static void real(onnx::NodeProto* n, const char* name, float v) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  // The activation of `x` in opset-12 operators.
  std::string activation(ExportAct act, double alpha, const std::string& x) {
    std::string out;
    switch (act) {
      case ExportAct::kNone:
        return x;
      case ExportAct::kSiLU:
        return op("Mul", {x, op("Sigmoid", {x})});
      case ExportAct::kReLU:
        return op("Relu", {x});
      case ExportAct::kLeakyReLU:
        real(node("LeakyRelu", {x}, &out), "alpha", static_cast<float>(alpha));
        return out;
      case ExportAct::kReLU6:
        return op("Clip", {x, scalar_of_type(0), scalar_of_type(6)});
      case ExportAct::kHardswish: {  // x * relu6(x + 3) / 6 = x * HardSigmoid(1/6, 0.5)
        onnx::NodeProto* n = node("HardSigmoid", {x}, &out);
        real(n, "alpha", 1.0f / 6);
        real(n, "beta", 0.5f);
        return op("Mul", {x, out});
      }
      case ExportAct::kSigmoid:
        return op("Sigmoid", {x});
      case ExportAct::kTanh:
        return op("Tanh", {x});
      case ExportAct::kGELU:  // the exact form: x / 2 (1 + erf(x / sqrt 2))
        return op("Mul",
                  {op("Mul", {x, scalar(0.5f)}),
                   op("Add", {op("Erf", {op("Mul", {x, scalar(0.70710678f)})}), scalar(1.0f)})});
      case ExportAct::kMish:
        return op("Mul", {x, op("Tanh", {op("Softplus", {x})})});
      case ExportAct::kELU:
        real(node("Elu", {x}, &out), "alpha", static_cast<float>(alpha));
        return out;
    }
    return x;
  }
  // A scalar of the graph's float type (Clip's bounds must match its input's type).
  std::string scalar_of_type(float v) { return weight(fresh("const"), {{}, {v}}); }
  std::string concat(const std::vector<std::string>& in, int64_t axis) {
    std::string out;
    integer(node("Concat", in, &out), "axis", axis);
    return out;
  }
  std::string slice(const std::string& x, int64_t begin, int64_t end, int64_t axis) {
    return op("Slice", {x, int64s({begin}), int64s({end}), int64s({axis})});
  }
  std::string scalar(float v) { return constant({{1}, {v}}); }
  // TopK's values and indices (largest first) along `axis`; k is a 1-element int64 tensor.
  std::pair<std::string, std::string> topk(const std::string& x, const std::string& k,
                                           int64_t axis) {
    std::string values;
    onnx::NodeProto* n = node("TopK", {x, k}, &values);
    integer(n, "axis", axis);
    const std::string indices = fresh("TopK_indices");
    n->add_output(indices);
    return {values, indices};
  }
  std::string gather_elements(const std::string& x, const std::string& index, int64_t axis) {
    std::string out;
    integer(node("GatherElements", {x, index}, &out), "axis", axis);
    return out;
  }

 private:
  std::string fresh(const std::string& stem) { return stem + "_" + std::to_string(++count_); }
  // A constant of a fixed type (shapes, indices, Resize's scales), named fresh.
  onnx::TensorProto* initializer(int type, const std::vector<int64_t>& dims) {
    onnx::TensorProto* p = g_->add_initializer();
    p->set_name(fresh("const"));
    p->set_data_type(type);
    for (int64_t d : dims) p->add_dims(d);
    return p;
  }

  onnx::GraphProto* g_;
  const OnnxOptions& o_;
  int float_type_;
  int count_ = 0;
};

void set_shape(onnx::ValueInfoProto* v, int type, const std::vector<std::string>& dims) {
  v->mutable_type()->mutable_tensor_type()->set_elem_type(type);
  onnx::TensorShapeProto* shape = v->mutable_type()->mutable_tensor_type()->mutable_shape();
  for (const auto& d : dims) {
    onnx::TensorShapeProto::Dimension* dim = shape->add_dim();
    if (!d.empty() && std::isdigit(static_cast<unsigned char>(d[0]))) {
      dim->set_dim_value(std::stoll(d));
    } else {
      dim->set_dim_param(d);
    }
  }
}

// (1, 1, ny * nx, 2): each cell's (x, y) minus 0.5, row by row, for a fixed input size.
ExportArray fixed_grid(int64_t ny, int64_t nx) {
  ExportArray a{{1, 1, ny * nx, 2}, {}};
  a.values.reserve(static_cast<size_t>(ny * nx * 2));
  for (int64_t y = 0; y < ny; ++y) {
    for (int64_t x = 0; x < nx; ++x) {
      a.values.push_back(static_cast<float>(x) - 0.5f);
      a.values.push_back(static_cast<float>(y) - 0.5f);
    }
  }
  return a;
}

// Level i's anchors in pixels as (1, na, 1, 2).
ExportArray level_anchors(const ExportHead& h, int i) {
  const auto n = static_cast<size_t>(h.na) * 2;
  const auto begin = h.anchors.values.begin() + static_cast<std::ptrdiff_t>(n * i);
  return {{1, h.na, 1, 2}, std::vector<float>(begin, begin + static_cast<std::ptrdiff_t>(n))};
}

// The same grid computed from the map's own height and width (--dynamic).
std::string dynamic_grid(GraphWriter& w, const std::string& map) {
  // Range takes scalars: the lengths are gathered with scalar indices.
  const std::string shape = w.op("Shape", {map});
  std::string ny, nx;
  GraphWriter::integer(w.node("Gather", {shape, w.int64_scalar(2)}, &ny), "axis", 0);
  GraphWriter::integer(w.node("Gather", {shape, w.int64_scalar(3)}, &nx), "axis", 0);
  auto range = [&](const std::string& n, std::vector<int64_t> shape) {
    std::string f;
    onnx::NodeProto* cast =
        w.node("Cast", {w.op("Range", {w.int64_scalar(0), n, w.int64_scalar(1)})}, &f);
    GraphWriter::integer(cast, "to", w.float_type());
    return w.op("Reshape", {f, w.int64s(shape)});
  };
  const std::string xs = range(nx, {1, -1, 1}), ys = range(ny, {-1, 1, 1});
  const std::string zero_f = w.scalar(0.0f);
  const std::string xg = w.op("Add", {xs, w.op("Mul", {ys, zero_f})});  // (ny, nx, 1)
  const std::string yg = w.op("Add", {ys, w.op("Mul", {xs, zero_f})});
  const std::string grid = w.op("Reshape", {w.concat({xg, yg}, 2), w.int64s({1, 1, -1, 2})});
  return w.op("Sub", {grid, w.scalar(0.5f)});
}

// Ultralytics' anchor points of one level as (batch, 2, ny * nx): each cell's centre (x + 0.5,
// y + 0.5). Fixed: a constant for every image of the batch, entering as 0 * like + constant (a
// computed tensor: OpenCV 4.6 broadcasts a batch-1 constant wrongly beyond batch 1). Dynamic:
// (1, 2, ny * nx) computed from the map's own shape.
std::string anchor_points(GraphWriter& w, const std::string& map, const std::string& like,
                          int64_t ny, int64_t nx, const OnnxOptions& o) {
  if (o.dynamic) {
    const std::string grid = w.op("Add", {dynamic_grid(w, map), w.scalar(1.0f)});  // (1,1,N,2)
    std::string t;
    GraphWriter::ints(w.node("Transpose", {w.op("Reshape", {grid, w.int64s({1, -1, 2})})}, &t),
                      "perm", {0, 2, 1});
    return t;
  }
  ExportArray a{{o.batch, 2, ny * nx}, {}};
  a.values.resize(static_cast<size_t>(o.batch * 2 * ny * nx));
  const auto n = static_cast<size_t>(ny * nx);
  for (int64_t b = 0; b < o.batch; ++b) {
    float* p = a.values.data() + static_cast<size_t>(b) * 2 * n;
    for (int64_t y = 0; y < ny; ++y) {
      for (int64_t x = 0; x < nx; ++x) {
        p[y * nx + x] = static_cast<float>(x) + 0.5f;
        p[n + y * nx + x] = static_cast<float>(y) + 0.5f;
      }
    }
  }
  return w.op("Add", {w.op("Mul", {like, w.scalar(0.0f)}), w.constant(a)});
}

// One level of Ultralytics' anchor-free Detect, channels first: the distance bins' softmax
// expectation (DFL; the softmax over the last axis, which every opset's Softmax takes alike),
// boxes around the anchor points times the stride, sigmoid class scores; (bs, 4 + nc, ny * nx).
std::string anchor_free_level(GraphWriter& w, const ExportHead& h, int i, const std::string& box,
                              const std::string& cls, const OnnxOptions& o) {
  const auto st = static_cast<int64_t>(h.stride[i]);
  std::string d;
  if (h.reg_max > 1) {
    std::string t;
    GraphWriter::ints(
        w.node("Transpose", {w.op("Reshape", {box, w.int64s({0, 4, h.reg_max, -1})})}, &t), "perm",
        {0, 1, 3, 2});  // (bs, 4, N, reg_max)
    std::string sm;
    GraphWriter::integer(w.node("Softmax", {t}, &sm), "axis", 3);
    const ExportArray bins{{h.reg_max, 1}, h.dfl_bins.values};
    d = w.op("Reshape", {w.op("MatMul", {sm, w.constant(bins)}), w.int64s({0, 4, -1})});
  } else {
    d = w.op("Reshape", {box, w.int64s({0, 4, -1})});
  }
  const std::string lt = w.slice(d, 0, 2, 1);
  const std::string a = anchor_points(w, box, lt, o.height / st, o.width / st, o);
  const std::string x1y1 = w.op("Sub", {a, lt});
  const std::string x2y2 = w.op("Add", {a, w.slice(d, 2, 4, 1)});
  const std::string xy = w.op("Mul", {w.op("Add", {x1y1, x2y2}), w.scalar(0.5f)});
  const std::string wh = w.op("Sub", {x2y2, x1y1});
  const std::string xywh =
      w.op("Mul", {w.concat({xy, wh}, 1), w.scalar(static_cast<float>(h.stride[i]))});
  const std::string scores = w.op("Sigmoid", {w.op("Reshape", {cls, w.int64s({0, h.nc, -1})})});
  return w.concat({xywh, scores}, 1);
}

// Ultralytics' Detect.postprocess of the one-to-one head's (bs, 4 + nc, N) xywh output: the k
// anchors with the best class scores, then the k best (anchor, class) scores among them, as rows
// x1, y1, x2, y2, score, class (bs, k, 6). k is fixed in the graph, as in Ultralytics' files.
std::string end2end_topk(GraphWriter& w, const ExportHead& h, const std::string& y, int64_t k) {
  std::string t, best;
  GraphWriter::ints(w.node("Transpose", {y}, &t), "perm", {0, 2, 1});  // (bs, N, 4 + nc)
  const std::string boxes = w.slice(t, 0, 4, 2), scores = w.slice(t, 4, 4 + h.nc, 2);
  onnx::NodeProto* max = w.node("ReduceMax", {scores}, &best);
  GraphWriter::ints(max, "axes", {2});
  GraphWriter::integer(max, "keepdims", 0);
  const std::string kk = w.int64s({k});
  // Reshape to (bs, k, 1) rather than Unsqueeze, whose axes moved from attribute to input.
  const auto column = [&](const std::string& x) {
    return w.op("Reshape", {x, w.int64s({0, -1, 1})});
  };
  const std::string anchors = w.topk(best, kk, 1).second;  // (bs, k)
  const std::string candidates = w.gather_elements(
      scores, w.op("Expand", {column(anchors), w.int64s({1, 1, h.nc})}), 1);  // (bs, k, nc)
  const auto [score, flat] = w.topk(w.op("Reshape", {candidates, w.int64s({0, -1})}), kk, 1);
  const std::string nc = w.int64s({h.nc});
  const std::string anchor = w.gather_elements(anchors, w.op("Div", {flat, nc}), 1);
  const std::string b =
      w.gather_elements(boxes, w.op("Expand", {column(anchor), w.int64s({1, 1, 4})}), 1);
  const std::string xy = w.slice(b, 0, 2, 2);
  const std::string half_wh = w.op("Mul", {w.slice(b, 2, 4, 2), w.scalar(0.5f)});
  std::string cls;
  GraphWriter::integer(w.node("Cast", {column(w.op("Mod", {flat, nc}))}, &cls), "to",
                       w.float_type());
  return w.concat({w.op("Sub", {xy, half_wh}), w.op("Add", {xy, half_wh}), column(score), cls}, 2);
}

// Ultralytics' Attention on its qkv map: per head softmax(q^T k * scale) applied to v, reshaped
// to v's map (the kSlice input `v` gives the shape, fixed or not).
std::string attention(GraphWriter& w, const ExportOp& op, const std::string& qkv,
                      const std::string& v) {
  const int64_t kd = op.key_dim, hd = op.head_dim;
  const std::string p = w.op("Reshape", {qkv, w.int64s({0, op.heads, 2 * kd + hd, -1})});
  const std::string q =
      w.op("Mul", {w.slice(p, 0, kd, 2), w.scalar(static_cast<float>(op.attn_scale))});
  std::string qt, attn, at;
  GraphWriter::ints(w.node("Transpose", {q}, &qt), "perm", {0, 1, 3, 2});
  GraphWriter::integer(w.node("Softmax", {w.op("MatMul", {qt, w.slice(p, kd, 2 * kd, 2)})}, &attn),
                       "axis", 3);
  GraphWriter::ints(w.node("Transpose", {attn}, &at), "perm", {0, 1, 3, 2});
  const std::string y = w.op("MatMul", {w.slice(p, 2 * kd, 2 * kd + hd, 2), at});
  return w.op("Reshape", {y, w.op("Shape", {v})});
}

// The fixed-size grid and anchors of one level as (batch, na, ny, nx, 2) constants: OpenCV's dnn
// module broadcasts a constant only over some shapes (YOLOv5's batch-1 ones failed beyond batch 1).
ExportArray full_grid(int64_t batch, int64_t na, int64_t ny, int64_t nx) {
  ExportArray a{{batch, na, ny, nx, 2}, {}};
  const ExportArray g = fixed_grid(ny, nx);
  for (int64_t k = 0; k < batch * na; ++k) {
    a.values.insert(a.values.end(), g.values.begin(), g.values.end());
  }
  return a;
}
ExportArray full_anchors(const ExportHead& h, int i, int64_t batch, int64_t ny, int64_t nx) {
  const ExportArray one = level_anchors(h, i);
  ExportArray a{{batch, h.na, ny, nx, 2}, {}};
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t k = 0; k < h.na; ++k) {
      for (int64_t c = 0; c < ny * nx; ++c) {
        a.values.push_back(one.values[2 * k]);
        a.values.push_back(one.values[2 * k + 1]);
      }
    }
  }
  return a;
}

// One Detect level as YOLOv5 traces it: conv, (bs, na, ny, nx, no) sigmoid, xy and wh decoded
// against the level's constants, (bs, na*ny*nx, no).
std::string detect_level_fixed(GraphWriter& w, const ExportHead& h, int i, const std::string& y,
                               const OnnxOptions& o) {
  const int64_t na = h.na, no = h.no(), st = static_cast<int64_t>(h.stride[i]);
  const int64_t ny = o.height / st, nx = o.width / st;
  const std::string r = w.op("Reshape", {y, w.int64s({o.batch, na, no, ny, nx})});
  std::string t;
  GraphWriter::ints(w.node("Transpose", {r}, &t), "perm", {0, 1, 3, 4, 2});
  const std::string s = w.op("Sigmoid", {t});
  const std::string two = w.scalar(2.0f);
  const std::string xy = w.op("Mul", {w.op("Add", {w.op("Mul", {w.slice(s, 0, 2, 4), two}),
                                                   w.constant(full_grid(o.batch, na, ny, nx))}),
                                      w.scalar(static_cast<float>(h.stride[i]))});
  const std::string wh2 = w.op("Mul", {w.slice(s, 2, 4, 4), two});
  // OpenCV 4.6 multiplies by a constant of this shape wrongly beyond batch 1, but adds it right:
  // the anchors enter as 0 * wh2 + anchors, a computed tensor.
  const std::string anchors = w.op(
      "Add", {w.op("Mul", {wh2, w.scalar(0.0f)}), w.constant(full_anchors(h, i, o.batch, ny, nx))});
  const std::string wh = w.op("Mul", {w.op("Mul", {wh2, wh2}), anchors});
  const std::string cat = w.concat({xy, wh, w.slice(s, 4, no, 4)}, 4);
  return w.op("Reshape", {cat, w.int64s({o.batch, na * ny * nx, no})});
}

// The same for any batch and size (--dynamic): the maps flattened to (bs, na, ny * nx, no), the
// grid computed from the map's own shape.
std::string detect_level_dynamic(GraphWriter& w, const ExportHead& h, int i, const std::string& y) {
  const int64_t na = h.na, no = h.no();
  const std::string r = w.op("Reshape", {y, w.int64s({0, na, no, -1})});
  std::string t;
  GraphWriter::ints(w.node("Transpose", {r}, &t), "perm", {0, 1, 3, 2});
  const std::string s = w.op("Sigmoid", {t});
  const std::string two = w.scalar(2.0f);
  const std::string xy =
      w.op("Mul", {w.op("Add", {w.op("Mul", {w.slice(s, 0, 2, 3), two}), dynamic_grid(w, y)}),
                   w.scalar(static_cast<float>(h.stride[i]))});
  const std::string wh2 = w.op("Mul", {w.slice(s, 2, 4, 3), two});
  const std::string wh = w.op("Mul", {w.op("Mul", {wh2, wh2}), w.constant(level_anchors(h, i))});
  const std::string cat = w.concat({xy, wh, w.slice(s, 4, no, 3)}, 3);
  return w.op("Reshape", {cat, w.int64s({0, -1, no})});
}

std::string detect_level(GraphWriter& w, const ExportHead& h, int i, const std::string& x,
                         const OnnxOptions& o) {
  const std::string name = "detect.m." + std::to_string(i);
  const std::string y = w.conv(x, w.weight(name + ".weight", h.weight[i]),
                               w.weight(name + ".bias", h.bias[i]), 1, 1, 0, 1, 1);
  return o.dynamic ? detect_level_dynamic(w, h, i, y) : detect_level_fixed(w, h, i, y, o);
}

void write_ops(GraphWriter& w, const ExportGraph& g, std::vector<std::string>& v) {
  for (const ExportOp& op : g.ops) {
    switch (op.kind) {
      case ExportOp::Kind::kConv: {
        const std::string y =
            w.conv(v[op.inputs[0]], w.weight(op.name + ".weight", op.weight),
                   w.weight(op.name + ".bias", op.bias), {op.kernel, op.kernel_w},
                   {op.stride, op.stride_w}, {op.pad, op.pad_w}, op.dilation, op.groups);
        v.push_back(w.activation(op.act, op.alpha, y));
        break;
      }
      case ExportOp::Kind::kAct:
        v.push_back(w.activation(op.act, op.alpha, v[op.inputs[0]]));
        break;
      case ExportOp::Kind::kSpaceToDepth: {  // Focus: Slice with steps (opset 10+)
        const std::string& x = v[op.inputs[0]];
        const int64_t end = std::numeric_limits<int64_t>::max();
        std::vector<std::string> phases;
        for (const auto& [y0, x0] : {std::pair<int64_t, int64_t>{0, 0}, {1, 0}, {0, 1}, {1, 1}}) {
          phases.push_back(w.op("Slice", {x, w.int64s({y0, x0}), w.int64s({end, end}),
                                          w.int64s({2, 3}), w.int64s({2, 2})}));
        }
        v.push_back(w.concat(phases, 1));
        break;
      }
      case ExportOp::Kind::kPad: {  // (left, right, top, bottom) -> ONNX's begins then ends
        const auto& p = op.pads;
        v.push_back(w.op("Pad", {v[op.inputs[0]], w.int64s({0, 0, p[2], p[0], 0, 0, p[3], p[1]})}));
        break;
      }
      case ExportOp::Kind::kAdd:
        v.push_back(w.op("Add", {v[op.inputs[0]], v[op.inputs[1]]}));
        break;
      case ExportOp::Kind::kConcat: {
        std::vector<std::string> in;
        for (int i : op.inputs) in.push_back(v[i]);
        v.push_back(w.concat(in, 1));
        break;
      }
      case ExportOp::Kind::kMaxPool: {
        std::string y;
        onnx::NodeProto* n = w.node("MaxPool", {v[op.inputs[0]]}, &y);
        GraphWriter::ints(n, "kernel_shape", {op.kernel, op.kernel_w});
        GraphWriter::ints(n, "strides", {op.stride, op.stride_w});
        GraphWriter::ints(n, "pads", {op.pad, op.pad_w, op.pad, op.pad_w});
        v.push_back(y);
        break;
      }
      case ExportOp::Kind::kUpsample: {
        // torch's nearest upsampling: source index floor(dst / scale). Resize's roi and scales
        // are float32 whatever the data's type.
        const auto sc = static_cast<float>(op.scale);
        std::string y;
        onnx::NodeProto* n = w.node(
            "Resize", {v[op.inputs[0]], w.float32s({}), w.float32s({1.0f, 1.0f, sc, sc})}, &y);
        GraphWriter::text(n, "mode", "nearest");
        GraphWriter::text(n, "coordinate_transformation_mode", "asymmetric");
        GraphWriter::text(n, "nearest_mode", "floor");
        v.push_back(y);
        break;
      }
      case ExportOp::Kind::kSlice: {
        std::vector<std::string> parts;
        for (size_t i = 0; i + 1 < op.ranges.size(); i += 2) {
          parts.push_back(w.slice(v[op.inputs[0]], op.ranges[i], op.ranges[i + 1], 1));
        }
        v.push_back(parts.size() == 1 ? parts[0] : w.concat(parts, 1));
        break;
      }
      case ExportOp::Kind::kAttention:
        v.push_back(attention(w, op, v[op.inputs[0]], v[op.inputs[1]]));
        break;
    }
  }
}

}  // namespace

bool onnx_export_available() { return true; }

std::string onnx_model_bytes(const ExportGraph& g, const OnnxOptions& o) {
  if (o.opset < kMinOnnxOpset || o.opset > kMaxOnnxOpset) {
    throw std::runtime_error("ONNX opset " + std::to_string(o.opset) + " cannot be written");
  }
  onnx::ModelProto model;
  model.set_ir_version(ir_version_for(o.opset));
  model.set_producer_name("yolo-cpp");
  model.set_producer_version(YOLO_VERSION);
  onnx::OperatorSetIdProto* ops = model.add_opset_import();
  ops->set_domain("");
  ops->set_version(o.opset);
  auto* meta = model.add_metadata_props();
  meta->set_key("stride");
  meta->set_value(std::to_string(o.stride));
  meta = model.add_metadata_props();
  meta->set_key("names");
  meta->set_value(python_names_dict(o.names));
  for (const auto& [key, value] : o.metadata) {
    meta = model.add_metadata_props();
    meta->set_key(key);
    meta->set_value(value);
  }

  onnx::GraphProto* graph = model.mutable_graph();
  graph->set_name("yolo");
  GraphWriter w(graph, o);
  const std::string b = o.dynamic ? "batch" : std::to_string(o.batch);
  set_shape(graph->add_input(), w.float_type(),
            {b, "3", o.dynamic ? "height" : std::to_string(o.height),
             o.dynamic ? "width" : std::to_string(o.width)});
  graph->mutable_input(0)->set_name("images");
  std::vector<std::string> v = {"images"};
  write_ops(w, g, v);
  const ExportHead& h = g.head;
  std::vector<std::string> levels;
  for (size_t i = 0; i < h.inputs.size(); ++i) {
    const int l = static_cast<int>(i);
    levels.push_back(h.anchor_free ? anchor_free_level(w, h, l, v[h.box[i]], v[h.cls[i]], o)
                                   : detect_level(w, h, l, v[h.inputs[i]], o));
  }
  std::string out;
  GraphWriter::integer(w.node("Concat", levels, &out), "axis", h.anchor_free ? 2 : 1);
  const int64_t k = std::min<int64_t>(h.max_det, g.rows(o.height, o.width));
  if (h.end2end) out = end2end_topk(w, h, out, k);
  // The last node's output is the graph's output0.
  graph->mutable_node(graph->node_size() - 1)->set_output(0, "output0");
  onnx::ValueInfoProto* output = graph->add_output();
  output->set_name("output0");
  const std::string rows = o.dynamic ? "anchors" : std::to_string(g.rows(o.height, o.width));
  const std::string no = std::to_string(h.no());
  if (h.end2end) {
    set_shape(output, w.float_type(), {b, std::to_string(k), "6"});
  } else {
    set_shape(output, w.float_type(), {b, h.anchor_free ? no : rows, h.anchor_free ? rows : no});
  }
  try {
    onnx::checker::check_model(model);
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions(true, 1, true));
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("the ONNX graph failed its check: ") + e.what());
  }
  std::string bytes;
  if (!model.SerializeToString(&bytes)) throw std::runtime_error("cannot serialize the ONNX model");
  return bytes;
}

#endif

}  // namespace yolo
