// Reads lines of JSON [encoding, text] on stdin and writes, for each, the
// number of tokens tiktoken encodes the text into, special tokens read as
// text (encode_ordinary).
const { get_encoding } = require("tiktoken");
const readline = require("node:readline");

const encodings = {};
const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on("line", (line) => {
  const [name, text] = JSON.parse(line);
  encodings[name] ??= get_encoding(name);
  process.stdout.write(encodings[name].encode_ordinary(text).length + "\n");
});
