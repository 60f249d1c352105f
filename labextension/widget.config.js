// The inline view's ES module (src/widget.ts, compiled by tsc into lib/): one file, no
// imports left, loaded by anywidget in any notebook frontend. Its stylesheet is the panel's
// (style/*.css) plus style/inline.css, concatenated by the build:widget script.
const path = require('path');

module.exports = {
  mode: 'production',
  entry: './lib/widget.js',
  target: 'web',
  experiments: { outputModule: true },
  output: {
    path: path.resolve(__dirname, '../nbdist/jupyter/static'),
    filename: 'widget.js',
    library: { type: 'module' },
    clean: false
  },
  devtool: false,
  performance: { hints: false }
};
