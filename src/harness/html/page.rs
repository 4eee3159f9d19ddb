//! The page around a report: inline CSS and a small script (click to pin an event, copy the
//! reproduce command, and, for the browser test, whether the script ran without error and
//! how long the page took to load).

use super::escape;

const STYLE: &str = r#"
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1b1b1b;background:#fafafa}
header,section{padding:12px 20px}
header{background:#fff;border-bottom:1px solid #ddd}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:12px 0 6px}
.meta{color:#555}
.verdict{display:inline-block;margin-top:8px;padding:3px 10px;border-radius:4px;font-weight:600}
.verdict.pass{background:#e3f4e1;color:#1b5e20} .verdict.fail{background:#fde3e1;color:#b71c1c}
.repro{margin-top:8px} .repro code{background:#f1f1f1;padding:3px 6px;border-radius:3px}
button{margin-left:6px;font:inherit;font-size:12px}
.summary{display:grid;grid-template-columns:1fr 2fr;gap:20px}
table{border-collapse:collapse} td{padding:2px 10px 2px 0;vertical-align:top} .invariants td:first-child,.coverage td:first-child{white-space:nowrap}
tr.inv-fail td{color:#b71c1c;font-weight:600} tr.xfail td{color:#8d6e00} tr.xpass td{color:#b71c1c}
tr.pass td:nth-child(2){color:#1b5e20} tr.never td{color:#b71c1c}
.fault-item{color:#b71c1c}
.plan{color:#666;font-size:12px}
.hint{color:#666;margin:0 0 6px}
.detail{position:sticky;top:0;z-index:2;background:#fffde7;border:1px solid #e6d96b;padding:6px;font:12px ui-monospace,monospace;white-space:pre-wrap;word-break:break-all;max-height:9em;overflow:auto}
.scroll{overflow:auto;max-height:80vh;border:1px solid #ddd;background:#fff;margin-top:6px}
.sticky{position:sticky;top:0;z-index:1;background:#fff;border-bottom:1px solid #eee}
svg text{font:11px ui-monospace,monospace}
.lane-head rect{fill:#eceff1;stroke:#90a4ae} .lane-head text{font-weight:600;font-size:12px}
.lifeline{stroke:#cfd8dc;stroke-dasharray:4 3}
.axis{fill:#777}
.gap{stroke:#9e9e9e;stroke-dasharray:2 4} .gap-label{fill:#757575}
.arrow{stroke-width:1.3;fill:none} .arrow.req{stroke:#1565c0} .arrow.resp{stroke:#2e7d32;stroke-dasharray:5 3} .arrow.model{stroke:#6a1b9a}
.span{opacity:.5} .span.run{fill:#1565c0} .span.turn{fill:#00897b} .span.tool{fill:#f9a825} .span.down{fill:url(#hatch);opacity:1}
rect.fault{fill:#c62828;opacity:.13}
.ev circle{fill:#546e7a} .ev text{fill:#263238;paint-order:stroke;stroke:#fff;stroke-width:3px;stroke-linejoin:round} .ev{cursor:pointer}
.ev.fault-ev circle{fill:#c62828} .ev.fault-ev text{fill:#b71c1c;font-weight:600}
.ev.tool-ev circle{fill:#f9a825}
.ev.broke circle{fill:#d50000;r:6} .ev.broke text{fill:#d50000;font-weight:700}
.ev.pinned text{text-decoration:underline} pre.trace{content-visibility:auto}
.side-by-side{display:grid;grid-template-columns:1fr 1fr;gap:12px} .side-by-side pre,pre.diff{font:12px ui-monospace,monospace;background:#fff;border:1px solid #ddd;padding:8px;overflow:auto;max-height:50vh;white-space:pre-wrap;word-break:break-all}
pre.diff .add{background:#e6ffec;color:#1b5e20} pre.diff .del{background:#ffebe9;color:#b71c1c} pre.diff .hunk{color:#1565c0}
h3.divergence{color:#b71c1c}
.sequence-table td{font:12px ui-monospace,monospace;padding:1px 10px 1px 0;word-break:break-all} .sequence-table tr.differs td{color:#b71c1c} .sequence-table tr.first-divergence td{background:#fde3e1;color:#b71c1c;font-weight:700} .sequence-table tr.not-compared td{color:#999}
pre.trace{font:12px ui-monospace,monospace;background:#fff;border:1px solid #ddd;padding:8px;overflow:auto;max-height:40vh}
pre.trace span.broke{background:#fde3e1} pre.trace span.pinned{background:#fff59d}
"#;

const SCRIPT: &str = r#"
(function(){
  var errors=[];
  window.addEventListener('error',function(e){errors.push(String(e.message));document.body.dataset.errors=errors.join('\n');});
  function pin(i){
    var line=document.getElementById('l'+i);
    var detail=document.getElementById('detail');
    document.querySelectorAll('.pinned').forEach(function(n){n.classList.remove('pinned');});
    var ev=document.getElementById('e'+i);
    if(ev){ev.classList.add('pinned');}
    if(line){line.classList.add('pinned');detail.textContent='event '+(Number(i)+1)+': '+line.textContent+(ev&&ev.dataset.broke?'\nbroke: '+ev.dataset.broke:'');}
  }
  var hovered=null;
  document.addEventListener('mouseover',function(e){
    var t=e.target.closest('g[data-i]');
    if(!t||t===hovered||document.querySelector('.pinned')){return;}
    hovered=t;
    var line=document.getElementById('l'+t.dataset.i);
    if(line){document.getElementById('detail').textContent='event '+(Number(t.dataset.i)+1)+': '+line.textContent+(t.dataset.broke?'\nbroke: '+t.dataset.broke:'');}
  });
  document.addEventListener('click',function(e){
    var t=e.target.closest('[data-i],[data-goto],[data-copy]');
    if(!t){return;}
    if(t.dataset.copy){var c=document.getElementById(t.dataset.copy);if(navigator.clipboard){navigator.clipboard.writeText(c.textContent);}t.textContent='copied';return;}
    var i=t.dataset.i||t.dataset.goto;
    pin(i);
    if(t.dataset.goto){var ev=document.getElementById('e'+i);if(ev){ev.scrollIntoView({block:'center'});}e.preventDefault();}
  });
  window.addEventListener('load',function(){
    document.body.dataset.loadedMs=String(Math.round(performance.now()));
    document.body.dataset.ready=errors.length?'errors':'ok';
  });
})();
"#;

/// The whole document around `body`.
pub fn wrap(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"generator\" content=\"loopsim\"><title>{}</title><style>{STYLE}</style></head><body>{body}<script>{SCRIPT}</script></body></html>\n",
        escape(title)
    )
}
