// The report's only script: it draws the figures (Plotly specs embedded as JSON)
// one after another so that the page shows at once, and opens the frame bar that
// says how to reach a frame in Wireshark (frame links, clicks on figure points
// that carry a frame number).
(function () {
  var bar = document.getElementById('frame-bar');
  var command = document.getElementById('frame-command');
  function showFrame(frame) {
    var text = bar.dataset.command + frame;
    document.getElementById('frame-number').textContent = frame;
    document.getElementById('frame-filter').value = 'frame.number == ' + frame;
    command.value = text;
    bar.hidden = false;
    command.select();
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).catch(function () {});
    }
  }
  document.addEventListener('click', function (ev) {
    var link = ev.target.closest('a.frame');
    if (link) { ev.preventDefault(); showFrame(link.dataset.frame); }
  });
  document.getElementById('frame-close').addEventListener('click', function () {
    bar.hidden = true;
  });
  async function drawAll() {
    var specs = document.querySelectorAll('script.figure-spec');
    var done = 0;
    for (var i = 0; i < specs.length; i++) {
      var div = document.getElementById(specs[i].dataset.for);
      var fig = JSON.parse(specs[i].textContent);
      fig.layout.template = TEMPLATE;
      await Plotly.newPlot(div, fig.data, fig.layout, CONFIG);
      div.on('plotly_click', function (ev) {
        var point = ev.points && ev.points[0];
        if (point && point.customdata != null) { showFrame(point.customdata); }
      });
      done += 1;
      document.body.dataset.plotsRendered = String(done);
    }
    document.body.dataset.plotsDone = 'true';
  }
  drawAll().catch(function (err) { console.error('figure failed: ' + err); });
})();
