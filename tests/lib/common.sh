# Helpers shared by the shell tests (source it).

# write_shapes_yaml DIR: DIR/data.yaml describing generated shapes data in DIR/shapes (300 train,
# 100 val images, generated on first use).
write_shapes_yaml() {
  cat >"$1/data.yaml" <<YAML
path: $1/shapes
train: images/train
val: images/val
names: [circle, rectangle, triangle]
generate: shapes
YAML
}

# free_port: a TCP port on 127.0.0.1 that was free a moment ago (for MASTER_PORT).
free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
