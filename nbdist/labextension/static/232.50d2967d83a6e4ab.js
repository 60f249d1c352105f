"use strict";(self.rspackChunknbdist_panel=self.rspackChunknbdist_panel||[]).push([[232],{475(r,t,o){var e=o(601),n=o.n(e),a=o(314),i=(o.n(a))()(n());i.push([r.id,`.nbdist-panel {
  display: flex;
  flex-direction: column;
  background: var(--jp-layout-color1);
  color: var(--jp-ui-font-color1);
  font-family: var(--jp-ui-font-family);
  font-size: var(--jp-ui-font-size1);
  overflow: hidden;
}

.nbdist-header {
  display: flex;
  align-items: center;
  gap: 12px;
  padding: 6px 10px;
  border-bottom: 1px solid var(--jp-border-color2);
}

.nbdist-status {
  font-weight: 600;
}

.nbdist-totals {
  flex: 1;
  color: var(--jp-ui-font-color2);
}

.nbdist-message {
  padding: 8px 10px;
  border-bottom: 1px solid var(--jp-border-color2);
  background: var(--jp-layout-color2);
}

.nbdist-message[data-kind='error'] {
  background: var(--jp-error-color3, #fdd);
  color: var(--jp-error-color0, #900);
}

.nbdist-message[data-kind='warning'] {
  background: var(--jp-warn-color3, #ffe9b3);
}

.nbdist-message[data-kind='empty'] {
  font-size: var(--jp-ui-font-size2);
  padding: 16px 10px;
}

.nbdist-grid {
  flex: 1;
  min-height: 0;
  display: grid;
  grid-template-columns: minmax(0, 3fr) minmax(0, 2fr);
  grid-template-rows: minmax(0, 3fr) minmax(0, 2fr);
  gap: 1px;
  background: var(--jp-border-color2);
}

.nbdist-grid > * {
  background: var(--jp-layout-color1);
  overflow: auto;
  min-height: 0;
}

.nbdist-graph {
  display: flex;
  flex-direction: column;
  overflow: hidden;
}

.nbdist-graph-bar {
  display: flex;
  align-items: center;
  gap: 10px;
  padding: 4px 8px;
}

.nbdist-graph-stage {
  position: relative;
  flex: 1;
  min-height: 0;
  overflow: hidden;
}

.nbdist-graph-canvas {
  position: absolute;
  inset: 0;
  cursor: grab;
  touch-action: none;
}

.nbdist-legend {
  display: flex;
  flex-wrap: wrap;
  gap: 8px;
  color: var(--jp-ui-font-color2);
}

.nbdist-legend-item i {
  display: inline-block;
  width: 10px;
  height: 10px;
  margin-right: 3px;
  border-radius: 2px;
  vertical-align: middle;
}

.nbdist-tooltip {
  position: absolute;
  z-index: 2;
  max-width: 360px;
  padding: 6px 8px;
  white-space: pre-wrap;
  pointer-events: none;
  background: var(--jp-layout-color0);
  border: 1px solid var(--jp-border-color1);
  box-shadow: var(--jp-elevation-z4);
  font-size: var(--jp-ui-font-size0);
}

.nbdist-visually-hidden {
  position: absolute;
  width: 1px;
  height: 1px;
  margin: -1px;
  padding: 0;
  overflow: hidden;
  clip: rect(0 0 0 0);
  border: 0;
}

.nbdist-side,
.nbdist-objects,
.nbdist-workers {
  padding: 0 10px 8px;
}

.nbdist-heading {
  margin: 8px 0 4px;
  font-size: var(--jp-ui-font-size1);
}

.nbdist-subheading {
  margin: 8px 0 2px;
  font-size: var(--jp-ui-font-size0);
  color: var(--jp-ui-font-color2);
}

.nbdist-note {
  margin: 2px 0;
  color: var(--jp-ui-font-color2);
}

.nbdist-fields {
  display: grid;
  grid-template-columns: max-content 1fr;
  gap: 2px 8px;
  margin: 0;
}

.nbdist-fields dt {
  color: var(--jp-ui-font-color2);
}

.nbdist-fields dd {
  margin: 0;
  word-break: break-all;
}

.nbdist-error,
.nbdist-output {
  max-height: 160px;
  overflow: auto;
  margin: 2px 0;
  padding: 4px;
  font-size: var(--jp-code-font-size);
  white-space: pre-wrap;
  background: var(--jp-layout-color2);
}

.nbdist-error {
  color: var(--jp-error-color1, #c00);
}

.nbdist-button {
  border: 1px solid var(--jp-border-color1);
  background: var(--jp-layout-color2);
  color: var(--jp-ui-font-color1);
  border-radius: 3px;
  padding: 1px 8px;
  cursor: pointer;
}

.nbdist-wait-list {
  list-style: none;
  margin: 0;
  padding: 0;
}

.nbdist-wait,
.nbdist-node,
.nbdist-capacity-row {
  display: grid;
  grid-template-columns: minmax(80px, 1fr) minmax(60px, 2fr) max-content;
  align-items: center;
  gap: 6px;
  padding: 2px 0;
}

.nbdist-wait.nbdist-done {
  opacity: 0.6;
}

.nbdist-bar {
  position: relative;
  height: 10px;
  background: var(--jp-layout-color3);
  border-radius: 2px;
  overflow: hidden;
}

/* Scaled, not resized: a transform needs no layout, so updates at 10 Hz stay cheap. */
.nbdist-bar-fill {
  height: 100%;
  background: #2f80ed;
  transform-origin: left;
  transform: scaleX(0);
}

.nbdist-done .nbdist-bar-fill {
  background: #27ae60;
}

.nbdist-bar-mark {
  position: absolute;
  top: 0;
  bottom: 0;
  width: 2px;
  margin-left: -1px;
  background: var(--jp-ui-font-color1);
}

.nbdist-figure {
  color: var(--jp-ui-font-color2);
  white-space: nowrap;
}

.nbdist-table {
  width: 100%;
  border-collapse: collapse;
  font-size: var(--jp-ui-font-size0);
}

.nbdist-table th,
.nbdist-table td {
  text-align: left;
  padding: 1px 6px 1px 0;
  white-space: nowrap;
}

.nbdist-table th {
  color: var(--jp-ui-font-color2);
  position: sticky;
  top: 0;
  background: var(--jp-layout-color1);
}
`,""]),o.d(t,{},{A:i})},314(r){r.exports=function(r){var t=[];return t.toString=function(){return this.map(function(t){var o="",e=void 0!==t[5];return t[4]&&(o+="@supports (".concat(t[4],") {")),t[2]&&(o+="@media ".concat(t[2]," {")),e&&(o+="@layer".concat(t[5].length>0?" ".concat(t[5]):""," {")),o+=r(t),e&&(o+="}"),t[2]&&(o+="}"),t[4]&&(o+="}"),o}).join("")},t.i=function(r,o,e,n,a){"string"==typeof r&&(r=[[null,r,void 0]]);var i={};if(e)for(var s=0;s<this.length;s++){var d=this[s][0];null!=d&&(i[d]=!0)}for(var p=0;p<r.length;p++){var l=[].concat(r[p]);e&&i[l[0]]||(void 0!==a&&(void 0===l[5]||(l[1]="@layer".concat(l[5].length>0?" ".concat(l[5]):""," {").concat(l[1],"}")),l[5]=a),o&&(l[2]&&(l[1]="@media ".concat(l[2]," {").concat(l[1],"}")),l[2]=o),n&&(l[4]?(l[1]="@supports (".concat(l[4],") {").concat(l[1],"}"),l[4]=n):l[4]="".concat(n)),t.push(l))}},t}},601(r){r.exports=function(r){return r[1]}},72(r){var t=[];function o(r){for(var o=-1,e=0;e<t.length;e++)if(t[e].identifier===r){o=e;break}return o}function e(r,e){for(var n={},a=[],i=0;i<r.length;i++){var s=r[i],d=e.base?s[0]+e.base:s[0],p=n[d]||0,l="".concat(d," ").concat(p);n[d]=p+1;var c=o(l),u={css:s[1],media:s[2],sourceMap:s[3],supports:s[4],layer:s[5]};if(-1!==c)t[c].references++,t[c].updater(u);else{var f=function(r,t){var o=t.domAPI(t);return o.update(r),function(t){t?(t.css!==r.css||t.media!==r.media||t.sourceMap!==r.sourceMap||t.supports!==r.supports||t.layer!==r.layer)&&o.update(r=t):o.remove()}}(u,e);e.byIndex=i,t.splice(i,0,{identifier:l,updater:f,references:1})}a.push(l)}return a}r.exports=function(r,n){var a=e(r=r||[],n=n||{});return function(r){r=r||[];for(var i=0;i<a.length;i++){var s=o(a[i]);t[s].references--}for(var d=e(r,n),p=0;p<a.length;p++){var l=o(a[p]);0===t[l].references&&(t[l].updater(),t.splice(l,1))}a=d}}},659(r){var t={};r.exports=function(r,o){var e=function(r){if(void 0===t[r]){var o=document.querySelector(r);if(window.HTMLIFrameElement&&o instanceof window.HTMLIFrameElement)try{o=o.contentDocument.head}catch(r){o=null}t[r]=o}return t[r]}(r);if(!e)throw Error("Couldn't find a style target. This probably means that the value for the 'insert' parameter is invalid.");e.appendChild(o)}},540(r){r.exports=function(r){var t=document.createElement("style");return r.setAttributes(t,r.attributes),r.insert(t,r.options),t}},56(r,t,o){r.exports=function(r){var t=o.nc;t&&r.setAttribute("nonce",t)}},206(r){r.exports=function(r){if("u"<typeof document)return{update:function(){},remove:function(){}};var t=r.insertStyleElement(r);return{update:function(o){var e,n,a;e="",o.supports&&(e+="@supports (".concat(o.supports,") {")),o.media&&(e+="@media ".concat(o.media," {")),(n=void 0!==o.layer)&&(e+="@layer".concat(o.layer.length>0?" ".concat(o.layer):""," {")),e+=o.css,n&&(e+="}"),o.media&&(e+="}"),o.supports&&(e+="}"),(a=o.sourceMap)&&"u">typeof btoa&&(e+="\n/*# sourceMappingURL=data:application/json;base64,".concat(btoa(unescape(encodeURIComponent(JSON.stringify(a))))," */")),r.styleTagTransform(e,t,r.options)},remove:function(){var r;null===(r=t).parentNode||r.parentNode.removeChild(r)}}}},113(r){r.exports=function(r,t){if(t.styleSheet)t.styleSheet.cssText=r;else{for(;t.firstChild;)t.removeChild(t.firstChild);t.appendChild(document.createTextNode(r))}}},579(r,t,o){var e=o(72),n=o.n(e),a=o(206),i=o.n(a),s=o(659),d=o.n(s),p=o(56),l=o.n(p),c=o(540),u=o.n(c),f=o(113),b=o.n(f),g=o(475),v={};v.styleTagTransform=b(),v.setAttributes=l(),v.insert=d().bind(null,"head"),v.domAPI=i(),v.insertStyleElement=u(),n()(g.A,v),g.A&&g.A.locals&&g.A.locals}}]);