// Bundle the inline view (widget.config.js) with webpack's Node API (no webpack-cli needed).
const fs = require('fs');
const path = require('path');
const webpack = require('webpack');

const config = require('./widget.config.js');
webpack(config, (error, stats) => {
  if (error || stats.hasErrors()) {
    console.error(error || stats.toString('errors-only'));
    process.exit(1);
  }
  const out = config.output.path;
  const css = ['base.css', 'metrics.css', 'inline.css']
    .map(name => fs.readFileSync(path.join(__dirname, 'style', name), 'utf8'))
    .join('\n');
  fs.writeFileSync(path.join(out, 'widget.css'), css);
  console.log(`widget: ${path.join(out, 'widget.js')} and widget.css`);
});
