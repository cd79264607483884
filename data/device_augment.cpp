#include "data/device_augment.h"

#include <torch/torch.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <stdexcept>

namespace yolo {
namespace {

constexpr int kGrey = 114;
constexpr int64_t kLutSize = 3 * 256;

// Which of HSV -> BGR's four values (v, v(1-s), v(1-s f), v(1-s(1-f))) each hue sector gives to
// b, g and r, as OpenCV's table.
constexpr int kSectorValue[3][6] = {{1, 1, 3, 0, 0, 2}, {3, 0, 0, 2, 1, 1}, {0, 2, 1, 1, 3, 0}};

// OpenCV's 8-bit BGR -> HSV divisions in 12-bit fixed point: saturation 255 / v, hue 180 / 6d.
constexpr int64_t kDivTables = 2 * 256;
void append_hsv_tables(std::vector<double>& p) {
  const size_t at = p.size();
  p.resize(at + kDivTables, 0.0);
  for (int i = 1; i < 256; ++i) {
    p[at + i] = std::nearbyint((255 << 12) / double(i));
    p[at + 256 + i] = std::nearbyint((180 << 12) / (6.0 * i));
  }
}

struct CanvasRef {
  const CanvasRecipe* canvas;
  const SampleRecipe* sample;  // whose flips apply
};

// One canvas's column and row tables (see RecipeLayout): the source coordinate of output pixel
// (x, y), in 1/32 pixel, is computed from them as OpenCV computes it for the pixel the flips
// bring to (x, y).
//   warpAffine (inverse A): X = (cols0[x] + rows0[y]) >> 5, cols0 = rint(A00 x 1024),
//     rows0 = rint((A01 y + A02) 1024) + 16; Y from cols1 and rows1 likewise.
//   warpPerspective (inverse M): its columns go in blocks; cols0 = the block's first column,
//     cols1 = the offset in it, rows0 = y; render_batch evaluates OpenCV's expression.
void coord_tables(const CanvasRef& c, int64_t W, int64_t H, double* cols, double* rows,
                  double* mat) {
  const WarpParams& w = c.canvas->warp;
  const int64_t ow = w.size.width, oh = w.size.height;
  auto col = [&](int64_t x) { return c.sample->flip_lr ? ow - 1 - x : x; };
  auto row = [&](int64_t y) { return c.sample->flip_ud ? oh - 1 - y : y; };
  if (w.applied && w.perspective) {
    cv::Mat inv;
    cv::invert(cv::Mat(w.M), inv);
    for (int k = 0; k < 9; ++k) mat[k] = inv.at<double>(k / 3, k % 3);
    const int64_t bh = std::min<int64_t>(16, oh), bw = std::min<int64_t>(1024 / bh, ow);
    for (int64_t x = 0; x < W; ++x) {
      const int64_t xp = col(x), start = xp >= 0 ? xp / bw * bw : 0;
      cols[x] = static_cast<double>(start), cols[W + x] = static_cast<double>(xp - start);
    }
    for (int64_t y = 0; y < H; ++y) rows[y] = static_cast<double>(row(y)), rows[H + y] = 0;
    return;
  }
  cv::Matx23d A(1, 0, 0, 0, 1, 0);
  if (w.applied) {
    const cv::Matx23d M(w.M(0, 0), w.M(0, 1), w.M(0, 2), w.M(1, 0), w.M(1, 1), w.M(1, 2));
    cv::invertAffineTransform(M, A);
  }
  for (int64_t x = 0; x < W; ++x) {
    const double xp = static_cast<double>(col(x));
    cols[x] = std::nearbyint(A(0, 0) * xp * 1024);
    cols[W + x] = std::nearbyint(A(1, 0) * xp * 1024);
  }
  for (int64_t y = 0; y < H; ++y) {
    const double yp = static_cast<double>(row(y));
    rows[y] = std::nearbyint((A(0, 1) * yp + A(0, 2)) * 1024) + 16;
    rows[H + y] = std::nearbyint((A(1, 1) * yp + A(1, 2)) * 1024) + 16;
  }
}

std::vector<CanvasRef> list_canvases(const std::vector<SampleRecipe>& recipes) {
  std::vector<CanvasRef> out;
  for (const auto& r : recipes) out.push_back({&r.canvas, &r});
  for (const auto& r : recipes) {
    if (r.mixup) out.push_back({&*r.mixup, &r});
  }
  return out;
}

// Copies each tile's visible rectangle into one byte tensor and records the tiles.
at::Tensor pack_sources(const std::vector<CanvasRef>& canvases, RecipeLayout& L,
                        const at::TensorOptions& opt) {
  int64_t pixels = 0;
  for (const auto& c : canvases) {
    for (const auto& t : c.canvas->layout.tiles) pixels += t.dst.area();
  }
  at::Tensor out = at::empty({pixels, 3}, opt.dtype(at::kByte));
  auto* base = out.data_ptr<uint8_t>();
  int64_t offset = 0;
  for (size_t n = 0; n < canvases.size(); ++n) {
    const CanvasRecipe& c = *canvases[n].canvas;
    if (c.sources.size() != c.layout.tiles.size()) {
      throw std::invalid_argument("collate_recipes: a canvas needs one source per tile");
    }
    for (size_t i = 0; i < c.sources.size(); ++i) {
      const cv::Rect src = c.layout.tiles[i].src, dst = c.layout.tiles[i].dst;
      if (dst.empty()) continue;
      const cv::Rect inside = src & cv::Rect(cv::Point(), c.sources[i].size());
      if (c.sources[i].type() != CV_8UC3 || src.size() != dst.size() || inside != src) {
        throw std::invalid_argument(
            "collate_recipes: a tile is not a rectangle of its 8-bit "
            "BGR source the size of its place");
      }
      for (int y = 0; y < src.height; ++y) {
        std::memcpy(base + 3 * (offset + int64_t{y} * src.width),
                    c.sources[i].ptr<uint8_t>(src.y + y) + 3 * src.x, 3 * size_t(src.width));
      }
      L.tiles.push_back({static_cast<int64_t>(n), offset, dst});
      offset += dst.area();
    }
  }
  return out;
}

// Sizes and kinds of the batch and its canvases.
void measure(const std::vector<SampleRecipe>& recipes, const std::vector<CanvasRef>& canvases,
             RecipeLayout& L) {
  L.batch = static_cast<int64_t>(recipes.size());
  L.canvases = static_cast<int64_t>(canvases.size());
  for (const auto& r : recipes) {
    L.height = std::max<int64_t>(L.height, r.canvas.warp.size.height);
    L.width = std::max<int64_t>(L.width, r.canvas.warp.size.width);
    L.mixups += r.mixup ? 1 : 0;
    L.hsv += r.hsv.applied ? 1 : 0;
  }
  for (const auto& c : canvases) {
    const WarpParams& w = c.canvas->warp;
    if (w.size != c.sample->canvas.warp.size) {
      throw std::invalid_argument("collate_recipes: a mixup canvas differs in size");
    }
    L.canvas_height = std::max<int64_t>(L.canvas_height, c.canvas->layout.size.height);
    L.canvas_width = std::max<int64_t>(L.canvas_width, c.canvas->layout.size.width);
    (w.applied && w.perspective ? L.perspective : L.affine) += 1;
  }
  for (const auto& r : recipes) {
    L.padded = L.padded || r.canvas.warp.size != cv::Size(int(L.width), int(L.height));
  }
  if (L.canvases * (L.canvas_height + 2) * (L.canvas_width + 2) > INT_MAX) {
    throw std::invalid_argument("collate_recipes: the batch's canvases exceed 2^31 pixels");
  }
}

// Every number render_batch needs, in the sections RecipeLayout names.
std::vector<double> make_params(const std::vector<SampleRecipe>& recipes,
                                const std::vector<CanvasRef>& canvases, RecipeLayout& L) {
  const int64_t N = L.canvases, B = L.batch, H = L.height, W = L.width;
  int64_t size = 0;
  for (auto [offset, n] : {std::pair<int64_t*, int64_t>{&L.cols, N * 2 * W},
                           {&L.rows, N * 2 * H},
                           {&L.mats, N * 9},
                           {&L.kinds, N},
                           {&L.mix, L.mixups * 4},
                           {&L.hsv_index, L.hsv},
                           {&L.luts, L.hsv * kLutSize},
                           {&L.own, B * 2},
                           {&L.tables, int64_t{0}}}) {
    *offset = size, size += n;
  }
  std::vector<double> p(static_cast<size_t>(size), 0.0);
  for (int64_t n = 0; n < N; ++n) {
    const WarpParams& w = canvases[n].canvas->warp;
    coord_tables(canvases[n], W, H, &p[L.cols + n * 2 * W], &p[L.rows + n * 2 * H],
                 &p[L.mats + n * 9]);
    p[L.kinds + n] = w.applied && w.perspective;
  }
  double* mix = p.data() + L.mix;
  double* hsv_index = p.data() + L.hsv_index;
  double* lut = p.data() + L.luts;
  for (int64_t b = 0, partner = B; b < B; ++b) {
    const SampleRecipe& r = recipes[b];
    p[L.own + 2 * b] = r.canvas.warp.size.width, p[L.own + 2 * b + 1] = r.canvas.warp.size.height;
    if (r.mixup) {  // cv::addWeighted's weights, in float
      *mix++ = double(b), *mix++ = double(partner++);
      *mix++ = static_cast<float>(r.mixup_ratio), *mix++ = static_cast<float>(1 - r.mixup_ratio);
    }
    if (r.hsv.applied) {
      *hsv_index++ = double(b);
      const cv::Mat table = hsv_lut(r.hsv);
      for (int c = 0; c < 3; ++c) {
        for (int x = 0; x < 256; ++x) *lut++ = table.at<cv::Vec3b>(0, x)[c];
      }
    }
  }
  append_hsv_tables(p);
  L.size = static_cast<int64_t>(p.size());
  return p;
}

// collate()'s targets: labels re-normalised for samples padded to the batch's size.
at::Tensor make_targets(const std::vector<SampleRecipe>& recipes, const RecipeLayout& L,
                        const at::TensorOptions& opt) {
  size_t n = 0;
  for (const auto& r : recipes) n += r.labels.size();
  at::Tensor out = at::empty({static_cast<int64_t>(n), 6}, opt.dtype(at::kFloat));
  float* t = out.data_ptr<float>();
  for (size_t i = 0; i < recipes.size(); ++i) {
    const cv::Size size = recipes[i].canvas.warp.size;
    const bool pad = size.width != L.width || size.height != L.height;
    const float sx = float(size.width) / L.width, sy = float(size.height) / L.height;
    for (Label l : recipes[i].labels) {
      if (pad) l.cx *= sx, l.w *= sx, l.cy *= sy, l.h *= sy;
      *t++ = static_cast<float>(i);
      *t++ = l.cls, *t++ = l.cx, *t++ = l.cy, *t++ = l.w, *t++ = l.h;
    }
  }
  return out;
}

// The canvases, (N, canvas h + 2, canvas w + 2, 3) bytes: grey 114 with the tiles copied in at
// (1, 1). The grey rim lets the warp clamp its taps into the buffer and still read the border value
// for anything outside a canvas, as cv::BORDER_CONSTANT does.
at::Tensor place_canvases(const RecipeLayout& L, const at::Tensor& sources) {
  at::Tensor canvas =
      at::full({L.canvases, L.canvas_height + 2, L.canvas_width + 2, 3}, kGrey, sources.options());
  for (const auto& t : L.tiles) {
    const cv::Rect d = t.dst;
    canvas[t.canvas]
        .narrow(0, d.y + 1, d.height)
        .narrow(1, d.x + 1, d.width)
        .copy_(sources.narrow(0, t.offset, d.area()).view({d.height, d.width, 3}));
  }
  return canvas;
}

// warpPerspective's source coordinates in 1/32 pixel, per pixel in double as OpenCV evaluates
// them: X0 = M0 x0 + M1 y + M2 at the block's first column x0, then (X0 + M0 dx) * 32 / W with
// W = M6 x0 + M7 y + M8 + M6 dx, rounded to even.
std::pair<at::Tensor, at::Tensor> perspective_coords(const RecipeLayout& L, const at::Tensor& cols,
                                                     const at::Tensor& rows,
                                                     const at::Tensor& params) {
  const at::Tensor m = params.narrow(0, L.mats, L.canvases * 9).view({L.canvases, 9, 1, 1});
  auto M = [&](int k) { return m.select(1, k); };
  const at::Tensor x0 = cols.select(1, 0), dx = cols.select(1, 1), y = rows.select(1, 0);
  const at::Tensor w = M(6) * x0 + M(7) * y + M(8) + M(6) * dx;
  // 32 / w by a true division (Scalar / Tensor would multiply by a rounded reciprocal).
  const at::Tensor scale = at::where(w != 0, at::scalar_tensor(32.0, w.options()) / w, 0.0);
  auto coord = [&](int k) {
    const at::Tensor v = (M(k) * x0 + M(k + 1) * y + M(k + 2) + M(k) * dx) * scale;
    return v.clamp(double(INT_MIN), double(INT_MAX)).round().to(at::kInt);
  };
  return {coord(0), coord(3)};
}

// Every canvas's source coordinates (N, H, W), in 1/32 pixel, int32 as OpenCV's.
std::pair<at::Tensor, at::Tensor> source_coords(const RecipeLayout& L, const at::Tensor& params) {
  const int64_t N = L.canvases, H = L.height, W = L.width;
  const at::Tensor cols = params.narrow(0, L.cols, N * 2 * W).view({N, 2, 1, W});
  const at::Tensor rows = params.narrow(0, L.rows, N * 2 * H).view({N, 2, H, 1});
  at::Tensor X, Y;
  if (L.affine > 0) {
    const at::Tensor c = cols.to(at::kInt), r = rows.to(at::kInt);
    X = at::bitwise_right_shift(c.select(1, 0) + r.select(1, 0), 5);
    Y = at::bitwise_right_shift(c.select(1, 1) + r.select(1, 1), 5);
  }
  if (L.perspective > 0) {
    auto [px, py] = perspective_coords(L, cols, rows, params);
    if (L.affine == 0) return {px, py};
    const at::Tensor kind = params.narrow(0, L.kinds, N).view({N, 1, 1}) != 0;
    X = at::where(kind, px, X), Y = at::where(kind, py, Y);
  }
  return {X, Y};
}

// The batched warp: (N, 3, H, W) bytes (BGR). Bilinear as OpenCV's remap in fixed point: weights
// (32 - f) and f per axis (their product is the 15-bit weight / 32), rounded half up. Indices are
// int32 (collate_recipes checks that the canvases hold fewer than 2^31 pixels).
at::Tensor warp_canvases(const RecipeLayout& L, const at::Tensor& params,
                         const at::Tensor& canvas) {
  const int64_t N = L.canvases, H = L.height, W = L.width;
  const int64_t cw = L.canvas_width + 2, ch = L.canvas_height + 2;
  auto [X, Y] = source_coords(L, params);
  // In place where possible: these (N, H, W) tensors are the warp's memory.
  const at::Tensor fx = at::bitwise_and(X, 31), fy = at::bitwise_and(Y, 31);
  X.bitwise_right_shift_(5), Y.bitwise_right_shift_(5);
  const at::Tensor x1 = (X + 2).clamp_(0, cw - 1), x0 = X.add_(1).clamp_(0, cw - 1);
  const at::Tensor base = at::arange(N, X.options()).mul_(ch * cw).view({N, 1, 1});
  const at::Tensor row1 = (Y + 2).clamp_(0, ch - 1).mul_(cw).add_(base);
  const at::Tensor row0 = Y.add_(1).clamp_(0, ch - 1).mul_(cw).add_(base);
  const at::Tensor pixels = canvas.view({-1, 3});
  auto tap = [&](const at::Tensor& row, const at::Tensor& col, const at::Tensor& weight) {
    return pixels.index_select(0, (row + col).view(-1)) * weight.view({-1, 1});  // int32
  };
  const at::Tensor gx = 32 - fx, gy = 32 - fy;
  at::Tensor sum = tap(row0, x0, gy * gx);
  sum.add_(tap(row0, x1, gy * fx)).add_(tap(row1, x0, fy * gx)).add_(tap(row1, x1, fy * fx));
  return at::bitwise_right_shift(sum.add_(512), 10)
      .to(at::kByte)
      .view({N, H, W, 3})
      .permute({0, 3, 1, 2});
}

// Mixup: cv::addWeighted rounds a * alpha + (b * beta rounded to float) once (a fused
// multiply-add), which double arithmetic reproduces exactly. Returns the B samples' images.
at::Tensor mix(const RecipeLayout& L, const at::Tensor& params, const at::Tensor& img) {
  const at::Tensor out = img.narrow(0, 0, L.batch);
  if (L.mixups == 0) return out;
  const at::Tensor m = params.narrow(0, L.mix, L.mixups * 4).view({L.mixups, 4});
  const at::Tensor sample = m.select(1, 0).to(at::kLong), partner = m.select(1, 1).to(at::kLong);
  const at::Tensor alpha = m.select(1, 2).view({-1, 1, 1, 1});
  const at::Tensor beta = m.select(1, 3).to(at::kFloat).view({-1, 1, 1, 1});
  const at::Tensor b = img.index_select(0, partner).to(at::kFloat) * beta;
  const at::Tensor a = img.index_select(0, sample).to(at::kDouble) * alpha + b.to(at::kDouble);
  return out.index_copy(0, sample, a.to(at::kFloat).round().clamp(0, 255).to(at::kByte));
}

// A table looked up at every value of `index` (int32).
at::Tensor lookup(const at::Tensor& table, const at::Tensor& index) {
  return table.index_select(0, index.reshape(-1)).view(index.sizes());
}

// OpenCV's 8-bit BGR -> HSV (hue 0..180) in integers: (n, 3, H, W) int32.
at::Tensor bgr_to_hsv(const at::Tensor& bgr, const at::Tensor& sdiv, const at::Tensor& hdiv) {
  const at::Tensor b = bgr.select(1, 0), g = bgr.select(1, 1), r = bgr.select(1, 2);
  const at::Tensor v = at::maximum(at::maximum(b, g), r);
  const at::Tensor d = v - at::minimum(at::minimum(b, g), r);
  const at::Tensor s = at::bitwise_right_shift(d * lookup(sdiv, v) + 2048, 12);
  const at::Tensor num = at::where(v == r, g - b, at::where(v == g, b - r + 2 * d, r - g + 4 * d));
  at::Tensor h = at::bitwise_right_shift(num * lookup(hdiv, d) + 2048, 12);
  h = at::where(h < 0, h + 180, h);
  return at::stack({h, s, v}, 1);
}

// OpenCV's 8-bit HSV -> BGR (its vector code): in float, 1 - s f fused into one multiply-add (exact
// in double, rounded once), the result truncated.
at::Tensor hsv_to_bgr(const at::Tensor& hsv) {
  const at::Tensor h = hsv.select(1, 0).to(at::kFloat) * (6.0f / 180);
  const at::Tensor sector = h.trunc(), f = h - sector;
  const at::Tensor s = hsv.select(1, 1).to(at::kFloat) * (1.0f / 255);
  const at::Tensor v = hsv.select(1, 2).to(at::kFloat) * (1.0f / 255);
  const at::Tensor sd = s.to(at::kDouble);
  const at::Tensor values[4] = {v, v * (1 - s), v * (1 - sd * f.to(at::kDouble)).to(at::kFloat),
                                v * (1 - sd * (1 - f).to(at::kDouble)).to(at::kFloat)};
  at::Tensor in_sector[6];
  for (int k = 1; k < 6; ++k) in_sector[k] = sector == k;
  at::Tensor bgr[3];
  for (int c = 0; c < 3; ++c) {
    bgr[c] = values[kSectorValue[c][0]];
    for (int k = 1; k < 6; ++k)
      bgr[c] = at::where(in_sector[k], values[kSectorValue[c][k]], bgr[c]);
  }
  return at::stack({bgr[0], bgr[1], bgr[2]}, 1).mul_(255.0f).trunc_().clamp_(0, 255).to(at::kByte);
}

// HSV jitter of the samples that drew it: OpenCV's conversions around the per-sample tables.
at::Tensor jitter_hsv(const RecipeLayout& L, const at::Tensor& params, const at::Tensor& img) {
  if (L.hsv == 0) return img;
  const int64_t n = L.hsv;
  const at::Tensor index = params.narrow(0, L.hsv_index, n).to(at::kLong);
  const bool all = n == L.batch;
  const at::Tensor sdiv = params.narrow(0, L.tables, 256).to(at::kInt);
  const at::Tensor hdiv = params.narrow(0, L.tables + 256, 256).to(at::kInt);
  const at::Tensor hsv =
      bgr_to_hsv((all ? img : img.index_select(0, index)).to(at::kInt), sdiv, hdiv);
  // Each sample's 3 tables, one after another: value x of channel c of sample i at 768 i + 256 c +
  // x.
  const at::Tensor luts = params.narrow(0, L.luts, n * kLutSize).to(at::kInt);
  const auto iopt = hsv.options();
  const at::Tensor first = at::arange(n, iopt).view({n, 1, 1, 1}) * kLutSize +
                           at::arange(3, iopt).view({1, 3, 1, 1}) * 256;
  const at::Tensor bgr = hsv_to_bgr(lookup(luts, hsv.add_(first)));
  return all ? bgr : img.index_copy(0, index, bgr);
}

// Grey beyond each sample's own size, as collate() pads.
at::Tensor pad_to_batch(const RecipeLayout& L, const at::Tensor& params, const at::Tensor& img) {
  const at::Tensor own = params.narrow(0, L.own, L.batch * 2).view({L.batch, 2, 1, 1, 1});
  const auto lopt = img.options().dtype(at::kDouble);
  const at::Tensor xs = at::arange(L.width, lopt).view({1, 1, 1, L.width});
  const at::Tensor ys = at::arange(L.height, lopt).view({1, 1, L.height, 1});
  const at::Tensor inside = (xs < own.select(1, 0)) & (ys < own.select(1, 1));
  return at::where(inside, img, at::scalar_tensor(kGrey, img.options()));
}

}  // namespace

RecipeBatch collate_recipes(std::vector<SampleRecipe>& recipes, bool pin_memory) {
  RecipeBatch out;
  if (recipes.empty()) return out;
  const auto opt = at::TensorOptions().pinned_memory(pin_memory);
  const std::vector<CanvasRef> canvases = list_canvases(recipes);
  measure(recipes, canvases, out.layout);
  out.sources = pack_sources(canvases, out.layout, opt);
  std::vector<double> params = make_params(recipes, canvases, out.layout);
  out.params = at::empty({static_cast<int64_t>(params.size())}, opt.dtype(at::kDouble));
  std::memcpy(out.params.data_ptr<double>(), params.data(), params.size() * sizeof(double));
  out.targets = make_targets(recipes, out.layout, opt);
  for (auto& r : recipes) {
    out.paths.push_back(std::move(r.path));
    out.shapes.push_back(r.shape);
  }
  return out;
}

at::Tensor render_batch(const RecipeBatch& batch, const c10::Device& device) {
  const RecipeLayout& L = batch.layout;
  if (L.batch == 0) return at::empty({0, 3, 0, 0}, at::TensorOptions(device).dtype(at::kFloat));
  const at::Tensor params = batch.params.to(device, /*non_blocking=*/true);
  const at::Tensor canvas = place_canvases(L, batch.sources.to(device, /*non_blocking=*/true));
  at::Tensor img = mix(L, params, warp_canvases(L, params, canvas));
  img = jitter_hsv(L, params, img);
  if (L.padded) img = pad_to_batch(L, params, img);
  // RGB, as images_to_device converts bytes.
  return img.flip({1}).to(at::kFloat, false, false, at::MemoryFormat::Contiguous).mul_(1.0 / 255);
}

}  // namespace yolo
