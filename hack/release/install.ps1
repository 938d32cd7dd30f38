# Installs the tau CLI on Windows (amd64) from a TauGrid release: downloads
# the archive and the release's SHA256SUMS, checks the archive with
# Get-FileHash, and puts tau.exe into a directory you choose. It never
# edits PATH; it says how to add the directory when it is not on it.
#
#   powershell -File install.ps1 -Version v1.2.3 [-Dir $HOME\bin] [-BaseUrl URL]
param(
    [Parameter(Mandatory = $true)][string]$Version,
    [string]$Dir = (Join-Path $HOME "bin"),
    [string]$BaseUrl = "https://github.com/taugrid/taugrid/releases/download"
)
$ErrorActionPreference = "Stop"
if ($env:PROCESSOR_ARCHITECTURE -ne "AMD64") {
    throw "install.ps1 installs the Windows amd64 release; this machine is $($env:PROCESSOR_ARCHITECTURE)"
}
$BaseUrl = $BaseUrl.TrimEnd("/")
$archive = "tau_${Version}_windows_amd64.zip"
$tmp = Join-Path ([System.IO.Path]::GetTempPath()) ("tau-install-" + [System.Guid]::NewGuid())
New-Item -ItemType Directory -Path $tmp | Out-Null
try {
    Invoke-WebRequest -UseBasicParsing -Uri "$BaseUrl/$Version/SHA256SUMS" -OutFile (Join-Path $tmp "SHA256SUMS")
    Invoke-WebRequest -UseBasicParsing -Uri "$BaseUrl/$Version/$archive" -OutFile (Join-Path $tmp $archive)
    $want = $null
    foreach ($line in Get-Content (Join-Path $tmp "SHA256SUMS")) {
        $parts = $line -split "\s+"
        if ($parts.Count -ge 2 -and $parts[1] -eq $archive) { $want = $parts[0].ToLower() }
    }
    if (-not $want) { throw "SHA256SUMS of $Version lists no $archive" }
    $got = (Get-FileHash -Algorithm SHA256 -Path (Join-Path $tmp $archive)).Hash.ToLower()
    if ($got -ne $want) { throw "$archive does not match SHA256SUMS (got $got, want $want): nothing installed" }
    Expand-Archive -Path (Join-Path $tmp $archive) -DestinationPath (Join-Path $tmp "x")
    New-Item -ItemType Directory -Force -Path $Dir | Out-Null
    Copy-Item -Force (Join-Path $tmp "x\tau.exe") (Join-Path $Dir "tau.exe")
    Write-Output "installed tau $Version into $(Join-Path $Dir 'tau.exe')"
    $onPath = ($env:PATH -split ";") | Where-Object { $_.TrimEnd("\") -eq $Dir.TrimEnd("\") }
    if (-not $onPath) {
        Write-Output "$Dir is not on your PATH. To use tau by name, add it (Settings > System > About > Advanced system settings > Environment Variables), or for this session:"
        Write-Output "  `$env:PATH = `"$Dir;`$env:PATH`""
    }
} finally {
    Remove-Item -Recurse -Force $tmp
}
