// The dashboard's only script: live regions over server-sent events, times in the
// browser's zone, and the logs' live tail. Every page reads without it.
(function () {
  'use strict';

  // <time datetime> in the reader's zone; a relative one (an AGE) keeps its text and gets the
  // time as its title.
  function localTimes(root) {
    root.querySelectorAll('time[datetime]').forEach(function (element) {
      var when = new Date(element.getAttribute('datetime'));
      if (isNaN(when.getTime())) { return; }
      var shown = when.toLocaleString();
      if (element.hasAttribute('data-relative')) {
        element.title = shown;
      } else {
        element.textContent = shown;
        element.title = element.getAttribute('datetime');
      }
    });
  }

  // Replaces a region's content, keeping what the reader typed and where the focus was.
  function replace(region, html) {
    var typed = {};
    region.querySelectorAll('textarea[id], input[id]').forEach(function (field) {
      typed[field.id] = field.value;
    });
    var focused = document.activeElement && region.contains(document.activeElement)
      ? document.activeElement.id : '';
    var wasFinished = finished(region);
    region.innerHTML = html;
    Object.keys(typed).forEach(function (id) {
      var field = document.getElementById(id);
      if (field && region.contains(field)) { field.value = typed[id]; }
    });
    if (focused) {
      var again = document.getElementById(focused);
      if (again) { again.focus(); }
    }
    localTimes(region);
    // A Run that has just finished has a result and Events to read: load them.
    if (wasFinished === 'false' && finished(region) === 'true') { window.location.reload(); }
  }

  function finished(region) {
    var marked = region.querySelector('[data-finished]');
    return marked ? marked.getAttribute('data-finished') : null;
  }

  function live() {
    var url = document.body.getAttribute('data-live');
    if (!url || !window.EventSource) { return; }
    var source = new EventSource(url);
    document.querySelectorAll('[data-region]').forEach(function (region) {
      source.addEventListener(region.id, function (event) { replace(region, event.data); });
    });
  }

  // Follows a container's log: the last lines, then each new one, until the container ends.
  var tail = null;
  function follow(link) {
    var lines = document.getElementById('log-lines');
    var state = document.getElementById('log-state');
    if (!lines || !state) { return; }
    if (tail) { tail.close(); }
    lines.hidden = false;
    state.textContent = 'Following ' + link.textContent + '…';
    tail = new EventSource(link.getAttribute('data-live-logs'));
    tail.addEventListener('open', function () { lines.textContent = ''; });
    tail.addEventListener('line', function (event) {
      var atEnd = lines.scrollTop + lines.clientHeight >= lines.scrollHeight - 4;
      lines.appendChild(document.createTextNode(event.data + '\n'));
      if (atEnd) { lines.scrollTop = lines.scrollHeight; }
    });
    tail.addEventListener('problem', function (event) {
      state.textContent = event.data + ' (trying again)';
    });
    tail.addEventListener('end', function () {
      state.textContent = 'The container ' + link.textContent + ' has stopped.';
      tail.close();
    });
  }

  function logs() {
    document.querySelectorAll('a[data-live-logs]').forEach(function (link) {
      link.addEventListener('click', function (event) {
        if (!window.EventSource) { return; }
        event.preventDefault();
        follow(link);
      });
    });
  }

  localTimes(document);
  live();
  logs();
}());
