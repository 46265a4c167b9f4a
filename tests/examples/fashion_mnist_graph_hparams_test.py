#!/usr/bin/env python3
"""The Fashion-MNIST example's graph and hyperparameters, read by an independent decoder.

Two short runs of the example with different flags (on a small synthetic dataset), then, with
Python's protobuf and the public-layout .proto files of proto/ compiled by protoc here (not the
library's C++ code): every event file's records are checked (TFRecord framing, masked CRC32C),
the graph event's GraphDef must hold the model's layers as nodes with the edges of its graph,
graph.pbtxt must parse as text format and equal it, and the HParams plugin data (experiment,
session start with each run's flags, session end with its status) must parse as TensorBoard
reads it. Where TensorBoard itself is installed, its event accumulator loads the run too.
`trainhooks graph` and `trainhooks events` show the same.

  fashion_mnist_graph_hparams_test.py --example BIN --cli BIN --protoc BIN --proto-dir DIR
"""

import argparse
import glob
import gzip
import importlib
import os
import random
import struct
import subprocess
import sys
import tempfile
import unittest

ARGS = None


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked_crc(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    with open(path, "rb") as f:
        data = f.read()
    at = 0
    while at < len(data):
        header = data[at : at + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[at + 8 : at + 12])
        assert length_crc == masked_crc(header), f"{path}: bad length CRC at {at}"
        body = data[at + 12 : at + 12 + length]
        (body_crc,) = struct.unpack("<I", data[at + 12 + length : at + 16 + length])
        assert body_crc == masked_crc(body), f"{path}: bad data CRC at {at}"
        yield body
        at += 16 + length


def write_idx_gz(path, dims, values):
    header = struct.pack(">I", 0x800 | len(dims)) + b"".join(struct.pack(">I", d) for d in dims)
    with gzip.open(path, "wb") as f:
        f.write(header + bytes(values))


def write_dataset(directory):
    rng = random.Random(7)
    for prefix, n in (("train", 64), ("t10k", 32)):
        labels = [rng.randrange(10) for _ in range(n)]
        images = [min(255, label * 20 + rng.randrange(60)) for label in labels for _ in range(784)]
        write_idx_gz(os.path.join(directory, f"{prefix}-images-idx3-ubyte.gz"), [n, 28, 28], images)
        write_idx_gz(os.path.join(directory, f"{prefix}-labels-idx1-ubyte.gz"), [n], labels)


class FashionMnistGraphAndHParams(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        root = cls.tmp.name
        # The public-layout protos, compiled for Python: proto/<name>_pb2.py.
        subprocess.run(
            [ARGS.protoc, f"--python_out={root}", f"-I{os.path.dirname(ARGS.proto_dir)}"]
            + sorted(glob.glob(os.path.join(ARGS.proto_dir, "*.proto"))),
            check=True,
        )
        sys.path.insert(0, root)
        cls.event_pb2 = importlib.import_module("proto.event_pb2")
        cls.graph_pb2 = importlib.import_module("proto.graph_pb2")
        cls.hparams_pb2 = importlib.import_module("proto.hparams_pb2")
        cls.tensor_pb2 = importlib.import_module("proto.tensor_pb2")
        data = os.path.join(root, "data")
        os.makedirs(data)
        write_dataset(data)
        cls.runs = {}
        common = ["--data-dir", data, "--steps", "4", "--batch-size", "8", "--warmup-steps", "1",
                  "--eval-every", "100", "--threads", "1", "--no-progress"]
        for name, flags in (("adam", ["--optimizer", "adam", "--lr", "0.002"]),
                            ("sgd", ["--optimizer", "sgd", "--lr", "0.05", "--regularize", "on"])):
            logdir = os.path.join(root, "runs", name)
            result = subprocess.run([ARGS.example, "--logdir", logdir] + common + flags,
                                    capture_output=True, text=True, timeout=600)
            assert result.returncode == 0, result.stdout + result.stderr
            cls.runs[name] = logdir

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def events(self, logdir):
        out = []
        for path in sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*"))):
            for body in records(path):
                out.append(self.event_pb2.Event.FromString(body))
        return out

    def graph_event(self, logdir):
        graphs = [e for e in self.events(logdir) if e.WhichOneof("what") == "graph_def"]
        self.assertEqual(len(graphs), 1, logdir)
        self.assertEqual(graphs[0].step, 0)
        return self.graph_pb2.GraphDef.FromString(graphs[0].graph_def)

    def test_graph_event_holds_the_models_layers_and_the_edges_of_its_graph(self):
        for name, logdir in self.runs.items():
            graph = self.graph_event(logdir)
            nodes = {n.name: n for n in graph.node}
            # add_module's names: the module's name, '/', LibTorch's parameter path.
            layers = ["net/conv1.weight", "net/conv1.bias", "net/conv2.weight", "net/conv2.bias",
                      "net/fc.weight", "net/fc.bias"]
            if name == "sgd":  # --regularize on: batch norms, whose statistics are not trained
                layers += ["net/bn1.weight", "net/bn1.bias", "net/bn2.weight", "net/bn2.bias"]
                self.assertFalse(nodes["net/bn1.running_mean"].attr["_trainable"].b)
            for layer in layers:
                self.assertEqual(nodes[layer].op, "VariableV2", layer)
                self.assertTrue(nodes[layer].attr["_trainable"].b, layer)
            self.assertEqual([d.size for d in nodes["net/fc.weight"].attr["shape"].shape.dim],
                             [10, 1600])
            self.assertEqual(nodes["net/fc.weight"].attr["dtype"].type, self.tensor_pb2.DT_FLOAT)
            self.assertEqual(nodes["train/data"].op, "IteratorGetNext")
            self.assertEqual(nodes["logits"].op, "CppFunc")
            # The op reads the batch through the Run and the module's parameters in forward().
            self.assertEqual(list(nodes["logits"].input), ["train/data"] + sorted(
                layers, key=lambda n: list(nodes).index(n)))
            # Read in one call, `cross_entropy_loss(r[logits], r[labels])`: in the order the
            # compiler evaluates the arguments.
            self.assertEqual(sorted(nodes["loss"].input), ["logits", "train/target"])
            self.assertEqual(sorted(nodes["accuracy"].input), ["logits", "train/target"])
            # Evaluated by the evaluation only, after the recorded first step: no inputs known.
            self.assertEqual(list(nodes["test/logits"].input), [])
            self.assertEqual(nodes["train_op"].op, "ApplyGradients")
            self.assertEqual(nodes["train_op"].attr["optimizer"].s, name.encode())
            self.assertEqual(nodes["train_op"].input[0], "loss")
            self.assertIn("global_step", nodes["train_op"].input)
            self.assertEqual([d.size for d in nodes["logits"].attr["_output_shapes"].list.shape[0].dim],
                             [8, 10])
            self.assertEqual(nodes["logits"].device, "/device:CPU:0")
            # Every input names a node of the graph.
            for node in graph.node:
                for i in node.input:
                    self.assertIn(i, nodes, node.name)

    def test_graph_pbtxt_parses_as_text_format_and_equals_the_event(self):
        from google.protobuf import text_format

        for logdir in self.runs.values():
            with open(os.path.join(logdir, "graph.pbtxt")) as f:
                from_text = text_format.Parse(f.read(), self.graph_pb2.GraphDef())
            self.assertEqual(from_text, self.graph_event(logdir))
            printed = subprocess.run([ARGS.cli, "graph", logdir], capture_output=True, text=True)
            self.assertEqual(printed.returncode, 0, printed.stderr)
            self.assertEqual(text_format.Parse(printed.stdout, self.graph_pb2.GraphDef()), from_text)

    def hparams(self, logdir):
        found = {}
        for e in self.events(logdir):
            if e.WhichOneof("what") != "summary":
                continue
            for v in e.summary.value:
                if v.metadata.plugin_data.plugin_name != "hparams":
                    continue
                self.assertTrue(v.tag.startswith("_hparams_/"), v.tag)
                self.assertEqual(v.tensor.dtype, self.tensor_pb2.DT_FLOAT)
                self.assertEqual([d.size for d in v.tensor.tensor_shape.dim], [0])
                data = self.hparams_pb2.HParamsPluginData.FromString(v.metadata.plugin_data.content)
                self.assertEqual(data.version, 0)
                found.setdefault(v.tag, []).append(data)
        return found

    def test_hparams_plugin_data_parses_with_each_runs_flags_and_status(self):
        expected = {"adam": ("adam", 0.002, False), "sgd": ("sgd", 0.05, True)}
        for name, logdir in self.runs.items():
            found = self.hparams(logdir)
            self.assertEqual(sorted(found), ["_hparams_/experiment", "_hparams_/session_end_info",
                                             "_hparams_/session_start_info"])
            experiment = found["_hparams_/experiment"][0].experiment
            self.assertEqual(sorted(h.name for h in experiment.hparam_infos),
                             ["batch_size", "ema", "lr", "optimizer", "precision", "regularize",
                              "steps", "warmup_steps"])
            self.assertEqual([(m.name.group, m.name.tag) for m in experiment.metric_infos],
                             [("eval", "accuracy"), ("eval", "loss"), ("", "loss")])
            start = found["_hparams_/session_start_info"][0].session_start_info
            optimizer, lr, regularize = expected[name]
            self.assertEqual(start.hparams["optimizer"].string_value, optimizer)
            self.assertAlmostEqual(start.hparams["lr"].number_value, lr)
            self.assertEqual(start.hparams["batch_size"].number_value, 8)
            self.assertEqual(start.hparams["steps"].number_value, 4)
            self.assertEqual(start.hparams["regularize"].bool_value, regularize)
            self.assertEqual(start.model_uri, logdir)
            end = found["_hparams_/session_end_info"][0].session_end_info
            self.assertEqual(end.status, self.hparams_pb2.STATUS_SUCCESS)
            self.assertGreaterEqual(end.end_time_secs, start.start_time_secs)

    def test_trainhooks_events_shows_the_hparams_and_the_graph(self):
        shown = subprocess.run([ARGS.cli, "events", self.runs["sgd"]], capture_output=True,
                               text=True)
        self.assertEqual(shown.returncode, 0, shown.stderr)
        self.assertIn('  hparams: batch_size=8, ema=0, lr=0.05, optimizer="sgd", precision="fp32", '
                      'regularize=true, steps=4, warmup_steps=1\n', shown.stdout)
        self.assertIn("  hparams metrics: eval/accuracy, eval/loss, loss\n", shown.stdout)
        self.assertIn("  hparams status: success\n", shown.stdout)
        self.assertRegex(shown.stdout, r"  graph: \d+ nodes, \d+ edges\n")

    def test_tensorboard_reads_the_graph_and_the_hparams_where_installed(self):
        try:
            from tensorboard.backend.event_processing import event_accumulator
        except ImportError:
            self.skipTest("TensorBoard is not installed")
        acc = event_accumulator.EventAccumulator(self.runs["adam"])
        acc.Reload()
        self.assertIn("logits", [n.name for n in acc.Graph().node])
        content = acc.PluginTagToContent("hparams")
        self.assertIn("_hparams_/session_start_info", content)


def require_protobuf():
    """Python's protobuf, from Debian's python3-protobuf (scripts/install-deps.sh): an interpreter
    of its own (a pyenv or venv python3 first on PATH) runs the test again with Debian's."""
    try:
        import google.protobuf  # noqa: F401
    except ImportError:
        system = "/usr/bin/python3"
        if os.path.exists(system) and os.path.realpath(sys.executable) != os.path.realpath(system):
            os.execv(system, [system] + sys.argv)
        sys.exit("fashion_mnist_graph_hparams_test: Python's protobuf is missing: install "
                 "python3-protobuf (scripts/install-deps.sh)")


def main():
    require_protobuf()
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--example", required=True)
    parser.add_argument("--cli", required=True)
    parser.add_argument("--protoc", required=True)
    parser.add_argument("--proto-dir", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
